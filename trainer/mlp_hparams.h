// The built-in trainer's hyperparameters (SPEC §6), parsed from the trial's JSON object
// with every default filled in and every value range-checked. docs/builtin-mlp.md lists
// them; keep the two in step.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "trainer/mlp_dataset.h"
#include "trainer/mlp_optimizer.h"

namespace cairn {

// Where builtin:mlp trains: kAuto picks CUDA when the driver sees a device and NVRTC and
// cuBLAS load (and, with several ranks, NCCL), else the CPU. The default is kAuto since the
// GPU path passed its tests on a real GPU (an H100, 2026-11-26; docs/builtin-mlp.md, "GPU").
enum class MlpDevice { kAuto, kCpu, kCuda };

// The keys whose validity depends on another key's value (read_dataset in mlp_hparams.cc):
// the dataset decides the features allowed and the defaults of features and samples, and
// samples × features is limited. Every other key is judged on its own value alone; the config
// check relies on that, so a rule that ties keys together must add them here.
inline constexpr std::array<std::string_view, 3> kMlpInterdependentKeys = {"dataset", "features",
                                                                           "samples"};

struct MlpHparams {
  MlpOptimizerConfig optimizer;  // optimizer, lr, momentum, weight_decay
  int hidden = 64;               // width of every hidden layer
  int layers = 2;                // number of hidden layers; 0 = softmax regression
  int batch_size = 64;
  MlpDatasetSpec data;
  std::optional<uint64_t> data_seed;  // absent: the trial's seed decides data and split
  int threads = 0;                    // BLAS threads; 0 = default (all cores)
  // Data parallel (more than one rank): start each gradient bucket's all-reduce as soon as
  // the backward pass has produced it (true), or all of them after the backward pass.
  bool overlap_allreduce = true;
  int bucket_kb = 512;             // gradient bytes per all-reduce bucket, at least
  double collective_timeout = 60;  // seconds a rank waits for the others in a collective
  MlpDevice device = MlpDevice::kAuto;

  // kBadInput with a one-line message naming the key on an unknown key, a wrong type or a
  // value out of range. Then `*key_at_fault` (when given) is that key, so that the config
  // check (engine/config/config_builtin_mlp.cc) can point at the line that set it: the unknown key,
  // "features" when it does not suit the dataset; for the samples × features limit the one
  // of the two that was given, "samples" when both were (the message names both); "" when
  // `hparams` is not an object.
  static Result<MlpHparams> from_json(const Json& hparams, std::string* key_at_fault = nullptr);
};

}  // namespace cairn
