// The built-in trainer's data: two generated classification problems and CSV files, split
// into training and validation sets. Everything is a pure function of the spec and the data
// seed, so a restarted trial trains on exactly the rows it trained on before.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace cairn {

enum class MlpDatasetKind { kSpirals, kTeacher, kCsv };

// A dataset request with every default already resolved (see MlpHparams::from_json).
struct MlpDatasetSpec {
  MlpDatasetKind kind = MlpDatasetKind::kSpirals;
  std::filesystem::path csv_path;  // kCsv only; relative paths are taken from `workdir`
  int64_t samples = 3000;          // generated datasets: rows in total
  int classes = 3;                 // generated datasets
  int features = 2;                // kTeacher only; spirals are always 2-D
  double noise = 0.2;              // spirals: angle jitter (radians); teacher: logit jitter
  double val_fraction = 0.2;       // share of rows held out for validation, in (0, 1)
};

// Rows of one split: `features` floats per row, row-major, and one label per row.
struct MlpSplit {
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t rows() const { return static_cast<int64_t>(y.size()); }
};

struct MlpDataset {
  std::string description;  // e.g. "spirals (3 classes, 3000 rows)", for logs
  int features = 0;
  int classes = 0;
  MlpSplit train;
  MlpSplit validation;
};

// Builds the dataset. Errors (unreadable or malformed CSV) are kBadInput with a message
// that names the file and line.
Result<MlpDataset> make_mlp_dataset(const MlpDatasetSpec& spec, uint64_t data_seed,
                                    const std::filesystem::path& workdir);

}  // namespace cairn
