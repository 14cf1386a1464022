// The built-in trainer's checkpoint file, `mlp.ckpt`: a versioned little-endian binary
// with the architecture in its header and a SHA-256 trailer, so a flipped bit or a torn
// write is detected before a single weight is trusted. Layout (version 1):
//
//   offset size  field
//        0    8  magic "CAIRNMLP"
//        8    4  u32 format version (1)
//       12    4  u32 inputs        16  u32 hidden     20  u32 layers     24  u32 classes
//       28    4  u32 optimizer (0 sgd, 1 adam)
//       32    8  u64 seed          40  u64 data seed
//       48    8  i64 epochs completed
//       56    8  i64 optimizer steps
//       64    8  u64 weight count W     72  u64 optimizer state count S
//       80  4·W  f32 weights (the model's flat buffer, see trainer/mlp_model.h)
//          4·S  f32 optimizer state (see trainer/mlp_optimizer.h)
//           64  SHA-256 of every byte before it, lowercase hex
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "common/status.h"
#include "trainer/mlp_model.h"
#include "trainer/mlp_optimizer.h"

namespace cairn {

inline constexpr char kMlpCheckpointFile[] = "mlp.ckpt";
inline constexpr uint32_t kMlpCheckpointVersion = 1;

struct MlpCheckpoint {
  MlpShape shape;
  MlpOptimizerKind optimizer = MlpOptimizerKind::kSgd;
  uint64_t seed = 0;
  uint64_t data_seed = 0;
  int64_t epochs_completed = 0;
  int64_t optimizer_steps = 0;
  std::vector<float> weights;
  std::vector<float> optimizer_state;
};

// Writes atomically (temporary file, then rename).
Status write_mlp_checkpoint(const std::filesystem::path& file, const MlpCheckpoint& checkpoint);

// kNotFound when the file is missing; kCorrupt when it is not a checkpoint, is truncated or
// fails its checksum; kBadInput for a version this build does not read.
Result<MlpCheckpoint> read_mlp_checkpoint(const std::filesystem::path& file);

}  // namespace cairn
