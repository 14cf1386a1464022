#include "trainer/mlp_trainer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string_view>

#include "common/exit_status.h"
#include "gpu/nccl_library.h"
#include "trainer/blas.h"
#include "trainer/mlp_checkpoint.h"
#include "trainer/mlp_random.h"

namespace cairn {
namespace {

// 2^28 floats = 1 GiB of weights; with gradients and Adam's moments four times that.
constexpr size_t kMaxParameters = size_t{1} << 28;
// Validation batches: large enough to keep BLAS busy, small enough to stay in cache.
constexpr int64_t kEvalRows = 1024;

std::string checkpoint_mismatch(const std::string& what, const std::string& in_file,
                                const std::string& here) {
  return "checkpoint does not fit this trial: " + what + " " + in_file + " in the checkpoint, " +
         here + " here";
}

constexpr uint64_t kDefaultDataSeed = 20190428;

// The most rows one rank gets of a global batch: the batch (no larger than the data) split
// over the ranks, rounded up.
int shard_capacity(int batch_size, int64_t train_rows, int world) {
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(batch_size, train_rows));
  return static_cast<int>((batch + world - 1) / world);
}

// A double as two floats whose sum is the double to about 2^-48 relative, so a loss total
// survives an all-reduce of floats (the collectives sum floats only).
std::array<float, 2> split_double(double x) {
  const float hi = static_cast<float>(x);
  return {hi, static_cast<float>(x - static_cast<double>(hi))};
}

}  // namespace

Status mlp_gpu_usable(int world_size) {
  if (Status st = cuda_mlp_available(); !st.ok()) return st;
  if (world_size > 1 && !nccl_available())
    return Status::NotFound("NCCL not found (needed with several ranks)");
  return Status::Ok();
}

Result<MlpDeviceChoice> choose_mlp_device(MlpDevice wanted, const Status& usable) {
  if (wanted == MlpDevice::kCpu) return MlpDeviceChoice{.cuda = false, .note = "cpu"};
  if (usable.ok())
    return MlpDeviceChoice{.cuda = true,
                           .note = wanted == MlpDevice::kAuto ? "cuda (auto)" : "cuda"};
  if (wanted == MlpDevice::kCuda) {
    // Exit 2 only for what repeats (no driver, no device, a library missing); a driver that
    // failed for now (cuInit: system not ready, unknown error) leaves the trial to a restart.
    const std::string message =
        "hyperparameter 'device' is \"cuda\" but this machine cannot train on a GPU: " +
        usable.message();
    return is_permanent_failure(usable) ? Status::BadInput(message) : Status::Failed(message);
  }
  return MlpDeviceChoice{.cuda = false, .note = "cpu (auto: " + usable.message() + ")"};
}

Result<std::unique_ptr<MlpTrainer>> MlpTrainer::create(const MlpHparams& hparams, uint64_t seed,
                                                       bool deterministic,
                                                       const std::filesystem::path& workdir,
                                                       const MlpDeviceChoice& device,
                                                       Collective* collective) {
  // Every trial of an experiment must see the same data, or a search compares trials on
  // different problems: the data has its own seed, fixed unless the config sets data_seed.
  const uint64_t data_seed = hparams.data_seed.value_or(kDefaultDataSeed);
  auto data = make_mlp_dataset(hparams.data, data_seed, workdir);
  if (!data.ok()) return data.status();
  const MlpShape shape{.inputs = data->features,
                       .hidden = hparams.hidden,
                       .layers = hparams.layers,
                       .classes = data->classes};
  if (shape.parameters() > kMaxParameters) {
    return Status::BadInput(
        "model " + shape.describe() + " has " + std::to_string(shape.parameters()) +
        " parameters; builtin:mlp allows at most " + std::to_string(kMaxParameters));
  }
  if (collective && collective->size() > 1) {
    // Gloo reduces host memory, NCCL device memory. The caller made the collective for the
    // device it chose, so a mismatch is a caller's mistake, reported rather than mended.
    const bool nccl = std::string_view(collective->backend()) == "nccl";
    if (device.cuda != nccl) {
      return Status::BadInput(std::string("device ") + (device.cuda ? "cuda" : "cpu") +
                              " cannot use the " + collective->backend() + " collective");
    }
  }
  blas::set_threads(deterministic ? 1 : hparams.threads);
  auto trainer = std::make_unique<MlpTrainer>(Passkey(), hparams, seed, data_seed,
                                              std::move(data).value(), collective);
  trainer->device_note_ = device.note;
  if (device.cuda) {
    if (Status st = trainer->attach_cuda(); !st.ok()) {
      // `auto` promises the CPU when the GPU cannot be used, and the libraries loading is
      // no proof that it can (a cuBLAS of another CUDA version, data too large, a kernel
      // the driver refuses). attach_cuda() sets cuda_ only on success, so the CPU state is
      // untouched. Not with several ranks: they already chose NCCL together.
      const bool alone = collective == nullptr || collective->size() == 1;
      if (hparams.device == MlpDevice::kAuto && alone) {
        trainer->device_note_ = "cpu (auto: the GPU failed: " + st.message() + ")";
        return trainer;
      }
      // What is missing or can never fit (kBadInput, kNotFound) ends the trial with exit 2;
      // what may pass (memory other processes hold, a context the driver could not create
      // now) stays kFailed, exit 1, and cairn restarts the trial.
      const std::string message = "cannot train on the GPU: " + st.message();
      return is_permanent_failure(st) ? Status::BadInput(message) : Status::Failed(message);
    }
  }
  return trainer;
}

// Copies the model, optimizer state and data to the GPU, where training continues.
Status MlpTrainer::attach_cuda() {
  const int eval_rows =
      static_cast<int>(std::clamp<int64_t>(data_.validation.rows(), 1, kEvalRows));
  auto made = CudaMlpModel::create(model_.shape(), optimizer_.config(),
                                   std::max(workspace_.max_rows(), eval_rows),
                                   /*device=*/0);  // cairn sets CUDA_VISIBLE_DEVICES per rank
  if (!made.ok()) return made.status();
  CudaMlpModel& gpu = **made;
  if (Status st = gpu.set_weights(model_.weights()); !st.ok()) return st;
  if (Status st = gpu.set_optimizer_state(optimizer_.state(), optimizer_.steps()); !st.ok())
    return st;
  if (Status st = gpu.set_data(data_.train, data_.validation); !st.ok()) return st;
  device_note_ += ": " + gpu.describe();
  cuda_ = std::move(made).value();
  return Status::Ok();
}

MlpTrainer::MlpTrainer(Passkey, const MlpHparams& hparams, uint64_t seed, uint64_t data_seed,
                       MlpDataset data, Collective* collective)
    : hparams_(hparams),
      seed_(seed),
      data_seed_(data_seed),
      data_(std::move(data)),
      model_(MlpShape{.inputs = data_.features,
                      .hidden = hparams.hidden,
                      .layers = hparams.layers,
                      .classes = data_.classes}),
      optimizer_(hparams.optimizer, model_.shape().parameters()),
      workspace_(model_.shape(), shard_capacity(hparams.batch_size, data_.train.rows(),
                                                collective ? collective->size() : 1)),
      order_(data_.train.rows()),
      collective_(collective && collective->size() > 1 ? collective : nullptr) {
  model_.initialize(seed_);
  if (collective_) {
    std::vector<size_t> layer_sizes;
    for (int l = 0; l < model_.shape().linear_layers(); ++l)
      layer_sizes.push_back(model_.shape().layer_parameters(l));
    buckets_ = std::make_unique<GradientBuckets>(*collective_, std::move(layer_sizes),
                                                 static_cast<size_t>(hparams.bucket_kb) << 10,
                                                 hparams.overlap_allreduce);
  }
}

// The order is rebuilt from (seed, epoch) rather than carried over, so a resumed run needs
// nothing but the epoch number to continue the sequence.
void MlpTrainer::shuffle_for_epoch(int64_t epoch) {
  std::iota(order_.begin(), order_.end(), 0);
  MlpRng rng(derive_seed(seed_, MlpStream::kShuffle, static_cast<uint64_t>(epoch)));
  for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i) {
    std::swap(order_[i], order_[rng.below(static_cast<uint64_t>(i) + 1)]);
  }
}

void MlpTrainer::gather_batch(const int64_t* rows, int count) {
  const size_t d = static_cast<size_t>(data_.features);
  float* x = workspace_.input();
  int32_t* y = workspace_.labels();
  for (int i = 0; i < count; ++i) {
    std::memcpy(x + i * d, data_.train.x.data() + rows[i] * d, sizeof(float) * d);
    y[i] = data_.train.y[rows[i]];
  }
}

Result<double> MlpTrainer::train_epoch() {
  if (cuda_) return train_epoch_cuda();
  shuffle_for_epoch(epochs_completed_);
  const int64_t n = data_.train.rows();
  double loss_sum = 0;
  if (!collective_) {
    const int batch = workspace_.max_rows();
    for (int64_t start = 0; start < n; start += batch) {
      const int rows = static_cast<int>(std::min<int64_t>(batch, n - start));
      gather_batch(order_.data() + start, rows);
      loss_sum += model_.forward_backward(workspace_, rows).loss_sum;
      optimizer_.step(model_.weights(), model_.gradients());
    }
    ++epochs_completed_;
    return loss_sum / static_cast<double>(n);
  }
  const int64_t world = collective_->size();
  const int64_t rank = collective_->rank();
  const int64_t batch = std::min<int64_t>(hparams_.batch_size, n);
  const auto on_ready = [this](int layer, std::span<float> g) { buckets_->layer_ready(layer, g); };
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t rows = std::min<int64_t>(batch, n - start);
    const int64_t lo = start + rows * rank / world;
    const int64_t hi = start + rows * (rank + 1) / world;
    gather_batch(order_.data() + lo, static_cast<int>(hi - lo));
    loss_sum += model_
                    .forward_backward(workspace_, static_cast<int>(hi - lo), on_ready,
                                      static_cast<int>(rows))
                    .loss_sum;
    if (Status st = buckets_->finish(); !st.ok()) return st;
    optimizer_.step(model_.weights(), model_.gradients());
  }
  std::array<float, 2> total = split_double(loss_sum);
  if (Status st = collective_->allreduce_sum(total.data(), total.size()); !st.ok()) return st;
  ++epochs_completed_;
  return (static_cast<double>(total[0]) + static_cast<double>(total[1])) / static_cast<double>(n);
}

// The CPU loop's twin: the same batches and shards, the work enqueued on the GPU. The host
// waits for the GPU only to hand a gradient bucket to NCCL and for the epoch's loss.
Result<double> MlpTrainer::train_epoch_cuda() {
  shuffle_for_epoch(epochs_completed_);
  if (Status st = cuda_->set_order(order_); !st.ok()) return st;
  const int64_t n = data_.train.rows();
  const int64_t world = collective_ ? collective_->size() : 1;
  const int64_t rank = collective_ ? collective_->rank() : 0;
  const int64_t batch = std::min<int64_t>(hparams_.batch_size, n);
  const CudaMlpModel::LayerGradientsReady on_ready =
      collective_ ? CudaMlpModel::LayerGradientsReady(
                        [this](int layer, std::span<float> g) { buckets_->layer_ready(layer, g); })
                  : CudaMlpModel::LayerGradientsReady();
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t rows = std::min<int64_t>(batch, n - start);
    const int64_t lo = start + rows * rank / world;
    const int64_t hi = start + rows * (rank + 1) / world;
    if (Status st =
            cuda_->train_batch(lo, static_cast<int>(hi - lo), static_cast<int>(rows), on_ready);
        !st.ok())
      return st;
    if (collective_)
      if (Status st = buckets_->finish(); !st.ok()) return st;
    if (Status st = cuda_->optimizer_step(); !st.ok()) return st;
  }
  const Result<MlpBatchStats> stats = cuda_->take_stats();
  if (!stats.ok()) return stats.status();
  double loss_sum = stats->loss_sum;
  if (collective_) {
    std::array<float, 2> total = split_double(loss_sum);
    if (Status st = cuda_->allreduce_host(*collective_, total.data(), total.size()); !st.ok())
      return st;
    loss_sum = static_cast<double>(total[0]) + static_cast<double>(total[1]);
  }
  ++epochs_completed_;
  return loss_sum / static_cast<double>(n);
}

Result<MlpTrainer::Eval> MlpTrainer::evaluate() const {
  const MlpSplit& val = data_.validation;
  if (cuda_) {
    const int64_t step = std::min<int64_t>(kEvalRows, cuda_->max_rows());
    for (int64_t start = 0; start < val.rows(); start += step) {
      const int rows = static_cast<int>(std::min<int64_t>(step, val.rows() - start));
      if (Status st = cuda_->evaluate_batch(start, rows); !st.ok()) return st;
    }
    const Result<MlpBatchStats> total = cuda_->take_stats();
    if (!total.ok()) return total.status();
    return Eval{.loss = total->loss_sum / static_cast<double>(total->rows),
                .accuracy = static_cast<double>(total->correct) / static_cast<double>(total->rows)};
  }
  const size_t d = static_cast<size_t>(data_.features);
  MlpWorkspace ws(model_.shape(), static_cast<int>(std::min(kEvalRows, val.rows())));
  MlpBatchStats total;
  for (int64_t start = 0; start < val.rows(); start += ws.max_rows()) {
    const int rows = static_cast<int>(std::min<int64_t>(ws.max_rows(), val.rows() - start));
    std::memcpy(ws.input(), val.x.data() + start * d, sizeof(float) * rows * d);
    std::memcpy(ws.labels(), val.y.data() + start, sizeof(int32_t) * rows);
    const MlpBatchStats batch = model_.evaluate(ws, rows);
    total.loss_sum += batch.loss_sum;
    total.correct += batch.correct;
    total.rows += batch.rows;
  }
  return Eval{.loss = total.loss_sum / static_cast<double>(total.rows),
              .accuracy = static_cast<double>(total.correct) / static_cast<double>(total.rows)};
}

// A GPU-trained model is copied to the host first: the file is the same either way.
Status MlpTrainer::save(const std::filesystem::path& dir) const {
  MlpCheckpoint checkpoint{
      .shape = model_.shape(),
      .optimizer = optimizer_.config().kind,
      .seed = seed_,
      .data_seed = data_seed_,
      .epochs_completed = epochs_completed_,
      .optimizer_steps = optimizer_.steps(),
      .weights = {model_.weights().begin(), model_.weights().end()},
      .optimizer_state = {optimizer_.state().begin(), optimizer_.state().end()}};
  if (cuda_) {
    checkpoint.optimizer_steps = cuda_->optimizer_steps();
    if (Status st = cuda_->get_weights(checkpoint.weights); !st.ok()) return st;
    if (Status st = cuda_->get_optimizer_state(checkpoint.optimizer_state); !st.ok()) return st;
  }
  return write_mlp_checkpoint(dir / kMlpCheckpointFile, checkpoint);
}

Status MlpTrainer::load(const std::filesystem::path& dir) {
  auto read = read_mlp_checkpoint(dir / kMlpCheckpointFile);
  if (!read.ok()) return read.status();
  const MlpCheckpoint& c = *read;
  if (!(c.shape == model_.shape())) {
    return Status::BadInput(
        checkpoint_mismatch("architecture", c.shape.describe(), model_.shape().describe()));
  }
  if (c.data_seed != data_seed_) {
    return Status::BadInput(
        checkpoint_mismatch("data seed", std::to_string(c.data_seed), std::to_string(data_seed_)));
  }
  // Another optimizer's checkpoint: only a clone (pbt) whose optimizer was perturbed loads
  // one, since a trial's own hyperparameters never change. Its weights carry over; the
  // saved state is the other optimizer's, so this one starts fresh (docs/builtin-mlp.md).
  const bool same_optimizer = c.optimizer == optimizer_.config().kind;
  const size_t state_size = same_optimizer ? optimizer_.state().size() : c.optimizer_state.size();
  if (c.weights.size() != model_.weights().size() || c.optimizer_state.size() != state_size ||
      c.epochs_completed < 0) {
    return Status::Corrupt("checkpoint " + (dir / kMlpCheckpointFile).string() +
                           " has buffers of the wrong size for " + c.shape.describe());
  }
  std::copy(c.weights.begin(), c.weights.end(), model_.weights().begin());
  if (same_optimizer) {
    optimizer_.restore(c.optimizer_state, c.optimizer_steps);
  } else {
    std::fprintf(stderr,
                 "builtin:mlp: the checkpoint holds %s's state; %s starts from fresh state\n",
                 std::string(optimizer_name(c.optimizer)).c_str(),
                 std::string(optimizer_name(optimizer_.config().kind)).c_str());
  }
  epochs_completed_ = c.epochs_completed;
  if (cuda_) {
    if (Status st = cuda_->set_weights(model_.weights()); !st.ok()) return st;
    if (Status st = cuda_->set_optimizer_state(optimizer_.state(), optimizer_.steps()); !st.ok())
      return st;
  }
  return Status::Ok();
}

std::vector<float> MlpTrainer::flat_weights() const {
  std::vector<float> weights(model_.weights().begin(), model_.weights().end());
  if (cuda_ && !cuda_->get_weights(weights).ok()) return {};
  return weights;
}

std::string MlpTrainer::describe() const {
  const MlpOptimizerConfig& opt = optimizer_.config();
  return data_.description + ", " + std::to_string(data_.train.rows()) + " train / " +
         std::to_string(data_.validation.rows()) + " validation; model " +
         model_.shape().describe() + " (" + std::to_string(model_.shape().parameters()) +
         " parameters); " + std::string(optimizer_name(opt.kind)) +
         " lr=" + std::to_string(opt.lr) + " batch_size=" + std::to_string(hparams_.batch_size) +
         "; device " + device_note_ +
         (cuda_ ? ""
                : "; BLAS threads " + std::to_string(blas::threads()) + ", OpenBLAS " +
                      blas::core_in_use() + " kernels");
}

}  // namespace cairn
