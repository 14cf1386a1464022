// builtin:mlp: gradients, learning, data, determinism across checkpoint/resume, checkpoint
// integrity and hyperparameter validation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "trainer/mlp_checkpoint.h"
#include "trainer/mlp_cpu_kernels.h"
#include "trainer/mlp_dataset.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_model.h"
#include "trainer/mlp_random.h"
#include "trainer/mlp_trainer.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() : path(make_unique_dir(fs::temp_directory_path(), "cairn-mlp-test").value()) {}
  fs::path path;
  ScopedDirRemover remover{path};
};

// These tests pin the CPU path (its bit-reproducibility in particular); the GPU path has its
// own tests in mlp_cuda_test.cc. So `device` defaults to cpu here, not auto.
MlpHparams parse(const Json& json) {
  Json with_device = json;
  if (with_device.is_object() && !with_device.contains("device")) with_device["device"] = "cpu";
  auto hp = MlpHparams::from_json(with_device);
  REQUIRE_MESSAGE(hp.ok(), hp.status().message());
  return *hp;
}

// The CPU, as mlp_main decides for `device: cpu`.
const MlpDeviceChoice kCpu{.cuda = false, .note = "cpu"};

std::unique_ptr<MlpTrainer> make_trainer(const Json& json, uint64_t seed = 1,
                                         const fs::path& workdir = fs::current_path()) {
  auto trainer = MlpTrainer::create(parse(json), seed, /*deterministic=*/true, workdir, kCpu);
  REQUIRE_MESSAGE(trainer.ok(), trainer.status().message());
  return std::move(trainer).value();
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double mean_loss(MlpModel& model, MlpWorkspace& ws, int rows) {
  return model.evaluate(ws, rows).loss_sum / rows;
}

// Central differences against backward(), parameter by parameter. A 1e-3 step keeps the
// float rounding error (~1e-7 / 2e-3) far below the tolerance while staying small enough
// that no ReLU in this seeded net changes side.
void check_gradients(const MlpShape& shape) {
  constexpr int kRows = 6;
  constexpr float kStep = 1e-3f;
  MlpModel model(shape);
  MlpRng rng(99);
  for (float& w : model.weights()) w = static_cast<float>(0.7 * rng.normal());
  MlpWorkspace ws(shape, kRows);
  for (int i = 0; i < kRows * shape.inputs; ++i) ws.input()[i] = static_cast<float>(rng.normal());
  for (int r = 0; r < kRows; ++r) ws.labels()[r] = static_cast<int32_t>(rng.below(shape.classes));

  model.forward_backward(ws, kRows);
  const std::vector<float> analytic(model.gradients().begin(), model.gradients().end());
  int nonzero = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    float& w = model.weights()[i];
    const float saved = w;
    w = saved + kStep;
    const double plus = mean_loss(model, ws, kRows);
    w = saved - kStep;
    const double minus = mean_loss(model, ws, kRows);
    w = saved;
    const double numeric = (plus - minus) / (2.0 * kStep);
    CAPTURE(i);
    CHECK(std::abs(numeric - analytic[i]) <= 2e-3 + 2e-2 * std::abs(numeric));
    nonzero += std::abs(analytic[i]) > 1e-4 ? 1 : 0;
  }
  CHECK(nonzero > static_cast<int>(analytic.size()) / 2);
}

TEST_CASE("mlp backward pass matches finite differences") {
  check_gradients(MlpShape{.inputs = 3, .hidden = 5, .layers = 2, .classes = 4});
  check_gradients(MlpShape{.inputs = 4, .hidden = 7, .layers = 1, .classes = 3});
  check_gradients(MlpShape{.inputs = 5, .hidden = 1, .layers = 0, .classes = 3});
}

TEST_CASE("mlp hands each layer's gradients over as one bucket, last layer first") {
  const MlpShape shape{.inputs = 2, .hidden = 8, .layers = 3, .classes = 3};
  MlpModel model(shape);
  model.initialize(3);
  MlpWorkspace ws(shape, 4);
  for (int i = 0; i < 8; ++i) ws.input()[i] = 0.1f * static_cast<float>(i);
  for (int r = 0; r < 4; ++r) ws.labels()[r] = r % 3;
  std::vector<int> order;
  size_t covered = 0;
  model.forward_backward(ws, 4, [&](int layer, std::span<float> grads) {
    order.push_back(layer);
    CHECK(grads.size() == shape.layer_parameters(layer));
    covered += grads.size();
  });
  CHECK(order == std::vector<int>{3, 2, 1, 0});
  CHECK(covered == shape.parameters());
}

// The optimizer kernels run a vectorised body and a scalar tail; a parameter must get the
// same bits whichever it falls in, or results would depend on how buffers are split into
// buckets.
TEST_CASE("mlp optimizer kernels give the same bits vectorised and one element at a time") {
  constexpr size_t kCount = 37;
  MlpRng rng(5);
  std::vector<float> w(kCount), m(kCount), v(kCount), g(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    w[i] = static_cast<float>(rng.normal());
    m[i] = static_cast<float>(0.1 * rng.normal());
    v[i] = static_cast<float>(0.01 * rng.uniform());
    g[i] = static_cast<float>(rng.normal());
  }
  const mlp_kernels::AdamConstants c{.beta1 = 0.9f,
                                     .beta2 = 0.999f,
                                     .epsilon = 1e-8f,
                                     .step_size = 0.013f,
                                     .inv_sqrt_bc2 = 7.1f,
                                     .shrink = 0.999f};
  auto w_all = w, m_all = m, v_all = v, w_one = w, m_one = m, v_one = v;
  mlp_kernels::adam_update(w_all.data(), m_all.data(), v_all.data(), g.data(), kCount, c);
  for (size_t i = 0; i < kCount; ++i) {
    mlp_kernels::adam_update(&w_one[i], &m_one[i], &v_one[i], &g[i], 1, c);
  }
  CHECK(bit_equal(w_all, w_one));
  CHECK(bit_equal(m_all, m_one));
  CHECK(bit_equal(v_all, v_one));
  CHECK_FALSE(bit_equal(w_all, w));

  auto w_sgd_all = w, v_sgd_all = m, w_sgd_one = w, v_sgd_one = m;
  mlp_kernels::sgd_momentum_update(w_sgd_all.data(), v_sgd_all.data(), g.data(), kCount, 0.05f,
                                   0.9f, 1e-4f);
  for (size_t i = 0; i < kCount; ++i) {
    mlp_kernels::sgd_momentum_update(&w_sgd_one[i], &v_sgd_one[i], &g[i], 1, 0.05f, 0.9f, 1e-4f);
  }
  CHECK(bit_equal(w_sgd_all, w_sgd_one));
  CHECK(bit_equal(v_sgd_all, v_sgd_one));
}

TEST_CASE("mlp learns the spirals well above chance") {
  for (const char* optimizer : {"sgd", "adam"}) {
    CAPTURE(optimizer);
    auto trainer =
        make_trainer({{"optimizer", optimizer}, {"hidden", 32}, {"layers", 2}, {"batch_size", 32}});
    const double first = *trainer->train_epoch();
    double last = first;
    for (int epoch = 1; epoch < 8; ++epoch) last = *trainer->train_epoch();
    const Result<MlpTrainer::Eval> eval = trainer->evaluate();
    REQUIRE(eval.ok());
    CHECK(last < 0.8 * first);
    CHECK(eval->accuracy > 0.6);  // chance is 1/3
    CHECK(std::isfinite(eval->loss));
  }
}

TEST_CASE("mlp learns the teacher problem") {
  auto trainer = make_trainer({{"dataset", "teacher"}, {"optimizer", "adam"}, {"samples", 4000}});
  for (int epoch = 0; epoch < 5; ++epoch) trainer->train_epoch();
  CHECK(trainer->evaluate()->accuracy > 0.35);  // chance is 1/10
}

TEST_CASE("mlp datasets are a function of the seed") {
  for (const char* name : {"spirals", "teacher"}) {
    CAPTURE(name);
    const MlpDatasetSpec spec = parse({{"dataset", name}, {"samples", 500}}).data;
    const MlpDataset a = make_mlp_dataset(spec, 5, ".").value();
    const MlpDataset b = make_mlp_dataset(spec, 5, ".").value();
    const MlpDataset c = make_mlp_dataset(spec, 6, ".").value();
    CHECK(a.train.rows() == 400);
    CHECK(a.validation.rows() == 100);
    CHECK(a.train.x == b.train.x);
    CHECK(a.train.y == b.train.y);
    CHECK(a.validation.x == b.validation.x);
    CHECK(a.train.x != c.train.x);
  }
}

TEST_CASE("mlp generated datasets cover every class") {
  const MlpDataset teacher = make_mlp_dataset(parse({{"dataset", "teacher"}}).data, 1, ".").value();
  std::vector<int> counts(teacher.classes);
  for (int32_t y : teacher.train.y) counts[y]++;
  for (int count : counts) CHECK(count > 0);
  const MlpDataset spirals = make_mlp_dataset(parse(Json::object()).data, 1, ".").value();
  CHECK(spirals.features == 2);
  CHECK(spirals.classes == 3);
}

TEST_CASE("mlp reads a CSV dataset relative to the workdir") {
  TempDir dir;
  {
    std::ofstream csv(dir.path / "data.csv");
    csv << "a,b,label\r\n";
    for (int i = 0; i < 50; ++i) csv << i << ", " << 100 + 2 * i << "," << i % 3 << "\r\n";
    csv << "\n";
  }
  auto trainer = make_trainer({{"dataset", "data.csv"}}, 1, dir.path);
  const MlpDataset& data = trainer->dataset();
  CHECK(data.features == 2);
  CHECK(data.classes == 3);
  CHECK(data.train.rows() + data.validation.rows() == 50);
  double mean = 0;
  for (int64_t r = 0; r < data.train.rows(); ++r) mean += data.train.x[r * 2 + 1];
  CHECK(std::abs(mean / data.train.rows()) < 1e-4);  // standardised on the training split
  trainer->train_epoch();

  {
    std::ofstream bad(dir.path / "bad.csv");
    bad << "1,2,0\n3,4,1\n5,0\n";
  }
  auto ragged = MlpTrainer::create(parse({{"dataset", "bad.csv"}}), 1, true, dir.path, kCpu);
  REQUIRE_FALSE(ragged.ok());
  CHECK(ragged.status().kind() == ErrorKind::kBadInput);
  CHECK(ragged.status().message().find("bad.csv:3:") != std::string::npos);

  auto missing = MlpTrainer::create(parse({{"dataset", "nope.csv"}}), 1, true, dir.path, kCpu);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().kind() == ErrorKind::kBadInput);
  CHECK(missing.status().message().find("nope.csv") != std::string::npos);
}

// Train 6 epochs straight, or 3 + save + load into a fresh trainer + 3: the same bits.
void check_bit_exact_resume(const Json& json) {
  TempDir dir;
  auto straight = make_trainer(json, 42);
  std::vector<double> straight_losses;
  for (int epoch = 0; epoch < 6; ++epoch) straight_losses.push_back(*straight->train_epoch());

  auto first_half = make_trainer(json, 42);
  for (int epoch = 0; epoch < 3; ++epoch) first_half->train_epoch();
  REQUIRE(first_half->save(dir.path).ok());
  const std::vector<float> halfway = first_half->flat_weights();

  auto resumed = make_trainer(json, 42);
  const Status loaded = resumed->load(dir.path);
  REQUIRE_MESSAGE(loaded.ok(), loaded.message());
  CHECK(resumed->epochs_completed() == 3);
  CHECK(bit_equal(resumed->flat_weights(), halfway));
  for (int epoch = 3; epoch < 6; ++epoch) CHECK(*resumed->train_epoch() == straight_losses[epoch]);

  CHECK(resumed->epochs_completed() == 6);
  CHECK(bit_equal(resumed->flat_weights(), straight->flat_weights()));
  CHECK_FALSE(bit_equal(halfway, straight->flat_weights()));
}

TEST_CASE("mlp resume from a checkpoint is bit-exact") {
  SUBCASE("sgd with momentum") {
    check_bit_exact_resume({{"optimizer", "sgd"},
                            {"momentum", 0.9},
                            {"weight_decay", 1e-4},
                            {"hidden", 16},
                            {"batch_size", 50},
                            {"samples", 1000}});
  }
  SUBCASE("adam") {
    check_bit_exact_resume({{"optimizer", "adam"},
                            {"weight_decay", 1e-2},
                            {"hidden", 16},
                            {"batch_size", 50},
                            {"samples", 1000}});
  }
}

TEST_CASE("mlp checkpoint corruption is detected") {
  TempDir dir;
  const Json json = {{"hidden", 8}, {"samples", 200}};
  auto trainer = make_trainer(json);
  trainer->train_epoch();
  REQUIRE(trainer->save(dir.path).ok());
  const fs::path file = dir.path / kMlpCheckpointFile;
  std::string bytes = read_file(file).value();

  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  REQUIRE(write_file_atomic(file, flipped).ok());
  auto fresh = make_trainer(json);
  const std::vector<float> before = fresh->flat_weights();
  Status s = fresh->load(dir.path);
  CHECK(s.kind() == ErrorKind::kCorrupt);
  CHECK(s.message().find("checksum") != std::string::npos);
  CHECK(bit_equal(fresh->flat_weights(), before));
  CHECK(fresh->epochs_completed() == 0);

  REQUIRE(write_file_atomic(file, bytes.substr(0, 100)).ok());
  CHECK(fresh->load(dir.path).kind() == ErrorKind::kCorrupt);
  REQUIRE(write_file_atomic(file, "hello").ok());
  CHECK(fresh->load(dir.path).kind() == ErrorKind::kCorrupt);
  fs::remove(file);
  CHECK(fresh->load(dir.path).kind() == ErrorKind::kNotFound);

  REQUIRE(write_file_atomic(file, bytes).ok());
  CHECK(fresh->load(dir.path).ok());
  CHECK(fresh->epochs_completed() == 1);
}

TEST_CASE("mlp refuses a checkpoint of another architecture or data seed") {
  TempDir dir;
  REQUIRE(make_trainer({{"hidden", 8}, {"samples", 200}, {"data_seed", 5}})->save(dir.path).ok());

  Status s = make_trainer({{"hidden", 16}, {"samples", 200}, {"data_seed", 5}})->load(dir.path);
  CHECK(s.kind() == ErrorKind::kBadInput);
  CHECK(s.message().find("architecture 2→8→8→3 in the checkpoint, 2→16→16→3 here") !=
        std::string::npos);

  // Another optimizer (a pbt clone's perturbed one): the weights carry over, and the
  // optimizer starts from fresh state, as a new trial's would.
  auto sgd = make_trainer({{"hidden", 8}, {"samples", 200}, {"data_seed", 5}});
  REQUIRE(sgd->train_epoch().ok());
  REQUIRE(sgd->save(dir.path).ok());
  auto adam =
      make_trainer({{"hidden", 8}, {"samples", 200}, {"optimizer", "adam"}, {"data_seed", 5}});
  s = adam->load(dir.path);
  CHECK_MESSAGE(s.ok(), s.message());
  CHECK(bit_equal(adam->flat_weights(), sgd->flat_weights()));
  CHECK(adam->epochs_completed() == 1);
  auto loss = adam->train_epoch();  // and it trains on from there
  REQUIRE(loss.ok());
  CHECK(std::isfinite(*loss));
  CHECK(adam->epochs_completed() == 2);

  s = make_trainer({{"hidden", 8}, {"samples", 200}, {"data_seed", 6}})->load(dir.path);
  CHECK(s.message().find("data seed") != std::string::npos);
  // The trial's own seed may differ: it seeds initialisation, not the data.
  CHECK(make_trainer({{"hidden", 8}, {"samples", 200}, {"data_seed", 5}}, 2)->load(dir.path).ok());
}

TEST_CASE("mlp hyperparameters: defaults") {
  const MlpHparams hp = parse(Json::object());
  CHECK(hp.optimizer.kind == MlpOptimizerKind::kSgd);
  CHECK(hp.optimizer.lr == 0.05);
  CHECK(hp.optimizer.momentum == 0.9);
  CHECK(hp.optimizer.weight_decay == 0.0);
  CHECK(hp.hidden == 64);
  CHECK(hp.layers == 2);
  CHECK(hp.batch_size == 64);
  CHECK(hp.data.kind == MlpDatasetKind::kSpirals);
  CHECK(hp.data.samples == 3000);
  CHECK(parse({{"optimizer", "adam"}}).optimizer.lr == 0.005);
  CHECK(parse({{"hidden", 32.0}}).hidden == 32);  // integral doubles are integers
  CHECK(parse({{"dataset", "teacher"}}).data.features == 20);
}

TEST_CASE("mlp hyperparameters: bad values are rejected with a one-line message") {
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"lr", -0.1}}, "hyperparameter 'lr' must be a number in (0, 10], got -0.1"},
      {{{"lr", "fast"}}, "'lr' must be a number"},
      {{{"momentum", 1}}, "'momentum' must be a number in [0, 1)"},
      {{{"weight_decay", -1}}, "'weight_decay'"},
      {{{"optimizer", "rmsprop"}}, "'optimizer' must be \"sgd\" or \"adam\", got \"rmsprop\""},
      {{{"hidden", 0}}, "'hidden' must be an integer in [1, 65536], got 0"},
      {{{"hidden", 3.5}}, "'hidden' must be an integer"},
      {{{"layers", -1}}, "'layers'"},
      {{{"batch_size", true}}, "'batch_size' must be an integer"},
      {{{"dataset", 7}}, "'dataset' must be a non-empty string"},
      {{{"features", 3}}, "'features' must be 2 for the spirals dataset"},
      {{{"val_fraction", 1.0}}, "'val_fraction'"},
      {{{"hiden", 64}}, "unknown hyperparameter 'hiden' (builtin:mlp takes lr, momentum"},
      {Json::array(), "hyperparameters must be a JSON object"},
  };
  for (const auto& [json, expected] : cases) {
    CAPTURE(json.dump());
    auto hp = MlpHparams::from_json(json);
    REQUIRE_FALSE(hp.ok());
    CHECK(hp.status().kind() == ErrorKind::kBadInput);
    CHECK(hp.status().message().find(expected) != std::string::npos);
    CHECK(hp.status().message().find('\n') == std::string::npos);
  }
  // The key at fault, for the config check that points at where it was written.
  const std::vector<std::pair<Json, std::string>> blamed = {
      {{{"lr", -0.1}}, "lr"},
      {{{"optimizer", "rmsprop"}, {"lr", 0.1}}, "optimizer"},
      {{{"hiden", 64}}, "hiden"},
      // samples × features: the one given (the other is its dataset's default), samples if both.
      {{{"dataset", "teacher"}, {"features", 200000}}, "features"},
      {{{"dataset", "teacher"}, {"features", 200000}, {"samples", 20000}}, "samples"},
      {{{"features", 3}}, "features"},
      {{{"device", "gpu"}}, "device"},
      {{{"allreduce", "ring"}}, "allreduce"},
      {Json::array(), ""},
  };
  for (const auto& [json, key] : blamed) {
    CAPTURE(json.dump());
    std::string at_fault = "unset";
    REQUIRE_FALSE(MlpHparams::from_json(json, &at_fault).ok());
    CHECK(at_fault == key);
  }
  auto huge = MlpTrainer::create(parse({{"hidden", 65536}, {"layers", 64}}), 1, true, ".", kCpu);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message().find("parameters") != std::string::npos);
}

}  // namespace
}  // namespace cairn
