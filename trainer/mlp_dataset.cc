#include "trainer/mlp_dataset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <numeric>
#include <string_view>

#include "common/file_util.h"
#include "trainer/mlp_random.h"

namespace cairn {
namespace {

// All rows before the split.
struct Rows {
  int features = 0;
  int classes = 0;
  std::vector<float> x;
  std::vector<int32_t> y;
};

// K interleaved arms: arm k starts at angle 2πk/K and makes one full turn while its radius
// grows from 0 to 1. Near the centre the arms touch, so even a perfect model errs a little.
Rows generate_spirals(const MlpDatasetSpec& spec, uint64_t data_seed) {
  constexpr double kTurns = 1.5;
  Rows rows;
  rows.features = 2;
  rows.classes = spec.classes;
  rows.x.reserve(static_cast<size_t>(spec.samples) * 2);
  rows.y.reserve(static_cast<size_t>(spec.samples));
  MlpRng rng(derive_seed(data_seed, MlpStream::kDataGeneration));
  const int64_t per_class = spec.samples / spec.classes;
  const int64_t remainder = spec.samples % spec.classes;
  for (int k = 0; k < spec.classes; ++k) {
    const int64_t n = per_class + (k < remainder ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      const double t = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
      const double angle =
          2.0 * std::numbers::pi * (static_cast<double>(k) / spec.classes + kTurns * t) +
          spec.noise * rng.normal();
      rows.x.push_back(static_cast<float>(t * std::cos(angle)));
      rows.x.push_back(static_cast<float>(t * std::sin(angle)));
      rows.y.push_back(k);
    }
  }
  return rows;
}

// Labels from a fixed random network, one tanh layer of kTeacherWidth units: a smooth,
// nonlinear boundary that a student MLP can learn but a linear model cannot. tanh keeps
// the teacher's logits centred, so no class dominates by construction.
Rows generate_teacher(const MlpDatasetSpec& spec, uint64_t data_seed) {
  constexpr int kTeacherWidth = 32;
  const int d = spec.features;
  const int k = spec.classes;
  MlpRng teacher_rng(derive_seed(data_seed, MlpStream::kTeacher));
  std::vector<double> w1(static_cast<size_t>(d) * kTeacherWidth), b1(kTeacherWidth);
  std::vector<double> w2(static_cast<size_t>(kTeacherWidth) * k);
  for (double& w : w1) w = teacher_rng.normal() / std::sqrt(static_cast<double>(d));
  for (double& b : b1) b = 0.1 * teacher_rng.normal();
  for (double& w : w2) w = teacher_rng.normal() / std::sqrt(static_cast<double>(kTeacherWidth));

  Rows rows;
  rows.features = d;
  rows.classes = k;
  rows.x.resize(static_cast<size_t>(spec.samples) * d);
  rows.y.resize(static_cast<size_t>(spec.samples));
  MlpRng rng(derive_seed(data_seed, MlpStream::kDataGeneration));
  std::vector<double> hidden(kTeacherWidth), logits(k);
  for (int64_t r = 0; r < spec.samples; ++r) {
    float* x = &rows.x[static_cast<size_t>(r) * d];
    for (int i = 0; i < d; ++i) x[i] = static_cast<float>(rng.normal());
    for (int j = 0; j < kTeacherWidth; ++j) {
      double z = b1[j];
      for (int i = 0; i < d; ++i) z += x[i] * w1[static_cast<size_t>(i) * kTeacherWidth + j];
      hidden[j] = std::tanh(z);
    }
    for (int c = 0; c < k; ++c) {
      double z = spec.noise * rng.normal();
      for (int j = 0; j < kTeacherWidth; ++j) z += hidden[j] * w2[static_cast<size_t>(j) * k + c];
      logits[c] = z;
    }
    rows.y[r] =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return rows;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (;;) {
    const size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

bool parse_float(std::string_view text, float* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(*out);
}

// A label is a non-negative integer; "3.0" is accepted because spreadsheets write that.
bool parse_label(std::string_view text, int32_t* out) {
  float value = 0;
  if (!parse_float(text, &value) || value < 0 || value > 1e6f || value != std::floor(value)) {
    return false;
  }
  *out = static_cast<int32_t>(value);
  return true;
}

class CsvReader {
 public:
  CsvReader(std::filesystem::path file, std::string display_name)
      : file_(std::move(file)), display_name_(std::move(display_name)) {}

  Result<Rows> read() {
    auto text = read_file(file_);
    if (!text.ok()) {
      return Status::BadInput("dataset '" + display_name_ +
                              "' is neither spirals, teacher nor a readable CSV file (" +
                              text.status().message() + ")");
    }
    std::string_view rest = *text;
    for (int line_number = 1; !rest.empty(); ++line_number) {
      const size_t newline = rest.find('\n');
      const std::string_view line = trim(rest.substr(0, newline));
      rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
      if (line.empty()) continue;
      if (Status s = add_line(line, line_number); !s.ok()) return s;
    }
    return finish();
  }

 private:
  Status add_line(std::string_view line, int line_number) {
    const auto fields = split_fields(line);
    const bool first = !seen_first_line_;
    seen_first_line_ = true;
    if (first && !looks_numeric(fields)) return Status::Ok();  // a header row
    if (fields.size() < 2) return error(line_number, "needs at least one feature and a label");
    if (rows_.features == 0) rows_.features = static_cast<int>(fields.size()) - 1;
    if (static_cast<int>(fields.size()) - 1 != rows_.features) {
      return error(line_number, "has " + std::to_string(fields.size()) + " columns, expected " +
                                    std::to_string(rows_.features + 1));
    }
    for (size_t i = 0; i + 1 < fields.size(); ++i) {
      float value = 0;
      if (!parse_float(fields[i], &value)) {
        return error(line_number, "column " + std::to_string(i + 1) + " ('" +
                                      std::string(fields[i]) + "') is not a finite number");
      }
      rows_.x.push_back(value);
    }
    int32_t label = 0;
    if (!parse_label(fields.back(), &label)) {
      return error(line_number, "the label ('" + std::string(fields.back()) +
                                    "', last column) is not a class number 0, 1, 2, …");
    }
    rows_.y.push_back(label);
    rows_.classes = std::max(rows_.classes, label + 1);
    return Status::Ok();
  }

  static bool looks_numeric(const std::vector<std::string_view>& fields) {
    float ignored = 0;
    return std::all_of(fields.begin(), fields.end(),
                       [&](std::string_view f) { return parse_float(f, &ignored); });
  }

  Result<Rows> finish() {
    if (rows_.y.size() < 2) {
      return Status::BadInput("dataset " + file_.string() + " has fewer than 2 data rows");
    }
    if (rows_.classes < 2) {
      return Status::BadInput("dataset " + file_.string() + " has a single class (label 0)");
    }
    return std::move(rows_);
  }

  Status error(int line_number, const std::string& what) const {
    return Status::BadInput(file_.string() + ":" + std::to_string(line_number) + ": " + what);
  }

  std::filesystem::path file_;
  std::string display_name_;  // as the user wrote it
  bool seen_first_line_ = false;
  Rows rows_;
};

void copy_row(const Rows& rows, int64_t row, MlpSplit& to) {
  const auto begin = rows.x.begin() + row * rows.features;
  to.x.insert(to.x.end(), begin, begin + rows.features);
  to.y.push_back(rows.y[row]);
}

// A seeded permutation decides which rows are held out, so the split does not depend on
// the order rows were generated or written in.
void split_rows(const Rows& rows, double val_fraction, uint64_t data_seed, MlpDataset& out) {
  const int64_t n = static_cast<int64_t>(rows.y.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  MlpRng rng(derive_seed(data_seed, MlpStream::kSplit));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  const int64_t held_out =
      std::clamp<int64_t>(std::llround(val_fraction * static_cast<double>(n)), 1, n - 1);
  for (int64_t i = 0; i < n; ++i) {
    copy_row(rows, order[i], i < held_out ? out.validation : out.train);
  }
}

// CSV columns come in any units; z-scoring with the training split's statistics (never the
// validation split's) keeps one learning rate meaningful across files.
void standardize(MlpDataset& data) {
  const int d = data.features;
  const int64_t n = data.train.rows();
  for (int i = 0; i < d; ++i) {
    double sum = 0, sum_sq = 0;
    for (int64_t r = 0; r < n; ++r) {
      const double v = data.train.x[r * d + i];
      sum += v;
      sum_sq += v * v;
    }
    const double mean = sum / n;
    const double var = std::max(0.0, sum_sq / n - mean * mean);
    const double scale = var > 1e-12 ? 1.0 / std::sqrt(var) : 1.0;
    for (MlpSplit* split : {&data.train, &data.validation}) {
      for (int64_t r = 0; r < split->rows(); ++r) {
        float& v = split->x[r * d + i];
        v = static_cast<float>((v - mean) * scale);
      }
    }
  }
}

std::string describe(const MlpDatasetSpec& spec, const Rows& rows) {
  std::string name = spec.kind == MlpDatasetKind::kSpirals   ? std::string("spirals")
                     : spec.kind == MlpDatasetKind::kTeacher ? std::string("teacher")
                                                             : spec.csv_path.string();
  return name + " (" + std::to_string(rows.features) + " features, " +
         std::to_string(rows.classes) + " classes, " + std::to_string(rows.y.size()) + " rows)";
}

}  // namespace

Result<MlpDataset> make_mlp_dataset(const MlpDatasetSpec& spec, uint64_t data_seed,
                                    const std::filesystem::path& workdir) {
  Rows rows;
  switch (spec.kind) {
    case MlpDatasetKind::kSpirals:
      rows = generate_spirals(spec, data_seed);
      break;
    case MlpDatasetKind::kTeacher:
      rows = generate_teacher(spec, data_seed);
      break;
    case MlpDatasetKind::kCsv: {
      auto read = CsvReader(workdir / spec.csv_path, spec.csv_path.string()).read();
      if (!read.ok()) return read.status();
      rows = std::move(read).value();
      break;
    }
  }
  MlpDataset data;
  data.description = describe(spec, rows);
  data.features = rows.features;
  data.classes = rows.classes;
  split_rows(rows, spec.val_fraction, data_seed, data);
  if (spec.kind == MlpDatasetKind::kCsv) standardize(data);
  return data;
}

}  // namespace cairn
