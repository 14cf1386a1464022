// A data-parallel C++ trial: linear regression by minibatch SGD, each global batch split
// over the trial's ranks, gradients summed with Gloo through the C++ SDK (cairn/gloo.hpp).
//
//   make -C examples/cpp-ddp && cairn run examples/cpp-ddp/ddp.yaml
//
// One unit of length = one epoch. N ranks with the same global batch follow the
// single-rank loss curve (to float rounding: the sums are grouped differently). Every rank
// calls the SDK at the same steps; rank 0 alone writes the checkpoint's file.
#include <cairn/gloo.hpp>
#include <cairn/trial.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

struct Data {
  int features = 0;
  std::vector<double> x;  // rows × features
  std::vector<double> y;
  size_t rows() const { return y.size(); }
};

// y = x · w_true + noise, the same on every rank (seeded by the trial's seed).
Data make_data(uint64_t seed, uint64_t stream, size_t rows, int features) {
  std::mt19937_64 rng(seed * 1000003 + stream);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> w_true(features);
  std::mt19937_64 teacher(seed);
  for (auto& w : w_true) w = normal(teacher);
  Data d;
  d.features = features;
  d.x.resize(rows * features);
  d.y.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    double t = 0;
    for (int f = 0; f < features; ++f) {
      d.x[r * features + f] = normal(rng);
      t += d.x[r * features + f] * w_true[f];
    }
    d.y[r] = t + 0.1 * normal(rng);
  }
  return d;
}

// Adds this rank's rows [begin, end) to grad (features entries, then the squared error).
void accumulate(const Data& d, const std::vector<double>& w, size_t begin, size_t end,
                std::vector<double>& grad) {
  for (size_t r = begin; r < end; ++r) {
    double err = -d.y[r];
    for (int f = 0; f < d.features; ++f) err += d.x[r * d.features + f] * w[f];
    for (int f = 0; f < d.features; ++f) grad[f] += 2 * err * d.x[r * d.features + f];
    grad[d.features] += err * err;
  }
}

int fail(const std::string& message) {
  std::fprintf(stderr, "train: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main() {
  std::string error;
  auto ctx = cairn::Context::init(&error);
  if (!ctx) return fail(error);
  auto group = cairn::GlooGroup::connect(*ctx, {}, &error);
  if (!group) return fail(error);
  std::printf("rank %d of %d connected\n", group->rank(), group->size());
  std::fflush(stdout);

  const auto& hp = ctx->hparams();
  const double lr = hp.value("lr", 0.01);
  const size_t batch = hp.value("batch_size", 64);
  const int features = hp.value("features", 16);
  const Data train = make_data(ctx->seed(), 1, hp.value("rows", 4096), features);
  const Data val = make_data(ctx->seed(), 2, 1024, features);

  std::vector<double> w(features, 0.0);
  int64_t epoch = ctx->steps_completed();
  if (const auto& dir = ctx->latest_checkpoint()) {
    std::ifstream in(*dir / "weights.bin", std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(w.data()), w.size() * sizeof(double)))
      return fail("cannot read " + (*dir / "weights.bin").string());
  }

  const size_t rank = group->rank(), world = group->size();
  std::vector<double> grad(features + 1);
  while (auto op = ctx->next_operation()) {
    while (epoch < op->length) {
      double loss_sum = 0;
      for (size_t start = 0; start < train.rows(); start += batch) {
        const size_t rows = std::min(batch, train.rows() - start);
        std::fill(grad.begin(), grad.end(), 0.0);
        accumulate(train, w, start + rows * rank / world, start + rows * (rank + 1) / world, grad);
        if (!group->allreduce_sum(grad.data(), grad.size(), &error)) return fail(error);
        for (int f = 0; f < features; ++f) w[f] -= lr * grad[f] / rows;
        loss_sum += grad[features];
      }
      ++epoch;
      ctx->report_training(epoch, {{"loss", loss_sum / train.rows()}});

      std::vector<double> val_err(features + 1, 0.0);
      accumulate(val, w, val.rows() * rank / world, val.rows() * (rank + 1) / world, val_err);
      if (!group->allreduce_sum(val_err.data(), val_err.size(), &error)) return fail(error);
      if (!ctx->report_validation(epoch, {{"val_loss", val_err[features] / val.rows()}}))
        return fail("cairn did not store the validation metrics");

      if (ctx->checkpoint_due(epoch)) {
        auto writer = ctx->checkpoint(epoch);
        if (rank == 0) {
          std::ofstream out(writer.path() / "weights.bin", std::ios::binary);
          out.write(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(double));
          if (!out.flush()) return fail("cannot write the checkpoint");
        }
        if (!writer.commit()) return fail("checkpoint: " + writer.error());
        if (ctx->should_preempt()) return 0;
      }
    }
  }
  return 0;
}
