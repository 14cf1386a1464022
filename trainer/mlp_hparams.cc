#include "trainer/mlp_hparams.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <string_view>

namespace cairn {
namespace {

constexpr const char* kKnownKeys[] = {
    "lr",           "momentum",  "weight_decay", "hidden",    "layers",    "batch_size",
    "optimizer",    "dataset",   "samples",      "classes",   "features",  "noise",
    "val_fraction", "data_seed", "threads",      "allreduce", "bucket_kb", "collective_timeout",
    "device"};

Status bad(const std::string& key, const std::string& expectation, const Json& got) {
  return Status::BadInput("hyperparameter '" + key + "' must be " + expectation + ", got " +
                          got.dump());
}

std::string known_keys_list() {
  std::string list;
  for (const char* key : kKnownKeys) list += (list.empty() ? "" : ", ") + std::string(key);
  return list;
}

// Reads hparams[key] into *out when present; absent keys keep the default in *out. Remembers
// the key of the first error, for a caller that points at where the value was written.
class Reader {
 public:
  explicit Reader(const Json& hparams) : hparams_(hparams) {}

  // `status` unchanged; when it is an error, `key` becomes the key at fault.
  Status blame(std::string_view key, Status status) {
    if (!status.ok() && failed_key_.empty()) failed_key_ = key;
    return status;
  }
  const std::string& failed_key() const { return failed_key_; }

  // A number in the range; `open_min`/`open_max` exclude that end.
  Status number(const char* key, double min, double max, bool open_min, bool open_max,
                double* out) {
    const Json* value = find(key);
    if (value == nullptr) return Status::Ok();
    const std::string range = std::string(open_min ? "(" : "[") + format(min) + ", " + format(max) +
                              (open_max ? ")" : "]");
    if (!value->is_number()) return blame(key, bad(key, "a number in " + range, *value));
    const double v = value->get<double>();
    const bool below = open_min ? v <= min : v < min;
    const bool above = open_max ? v >= max : v > max;
    if (!std::isfinite(v) || below || above)
      return blame(key, bad(key, "a number in " + range, *value));
    *out = v;
    return Status::Ok();
  }

  // Integers may arrive as 64.0 from a searcher that works in doubles.
  template <typename Int>
  Status integer(const char* key, int64_t min, int64_t max, Int* out) {
    const Json* value = find(key);
    if (value == nullptr) return Status::Ok();
    const std::string expectation =
        "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    if (!value->is_number()) return blame(key, bad(key, expectation, *value));
    const double v = value->get<double>();
    if (!std::isfinite(v) || v != std::floor(v) || v < static_cast<double>(min) ||
        v > static_cast<double>(max)) {
      return blame(key, bad(key, expectation, *value));
    }
    *out = static_cast<Int>(value->is_number_unsigned()  ? value->get<uint64_t>()
                            : value->is_number_integer() ? value->get<int64_t>()
                                                         : static_cast<int64_t>(v));
    return Status::Ok();
  }

  Status text(const char* key, std::string* out) {
    const Json* value = find(key);
    if (value == nullptr) return Status::Ok();
    if (!value->is_string() || value->get<std::string>().empty()) {
      return blame(key, bad(key, "a non-empty string", *value));
    }
    *out = value->get<std::string>();
    return Status::Ok();
  }

  bool has(const char* key) const { return hparams_.contains(key); }

 private:
  const Json* find(const char* key) const {
    const auto it = hparams_.find(key);
    return it == hparams_.end() || it->is_null() ? nullptr : &*it;
  }

  static std::string format(double v) {
    if (v == std::numeric_limits<double>::max()) return "inf";
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  }

  const Json& hparams_;
  std::string failed_key_;
};

Status check_known_keys(const Json& hparams, Reader& r) {
  const std::set<std::string> known(std::begin(kKnownKeys), std::end(kKnownKeys));
  for (const auto& [key, value] : hparams.items()) {
    if (!known.contains(key)) {
      return r.blame(key, Status::BadInput("unknown hyperparameter '" + key +
                                           "' (builtin:mlp takes " + known_keys_list() + ")"));
    }
  }
  return Status::Ok();
}

Status read_optimizer(Reader& r, MlpOptimizerConfig* config) {
  std::string name = "sgd";
  if (Status s = r.text("optimizer", &name); !s.ok()) return s;
  if (name == "sgd") {
    config->kind = MlpOptimizerKind::kSgd;
    config->lr = 0.05;
  } else if (name == "adam") {
    config->kind = MlpOptimizerKind::kAdam;
    config->lr = 0.005;
  } else {
    return r.blame("optimizer", bad("optimizer", "\"sgd\" or \"adam\"", Json(name)));
  }
  constexpr double kInf = std::numeric_limits<double>::max();
  if (Status s = r.number("lr", 0.0, 10.0, true, false, &config->lr); !s.ok()) return s;
  if (Status s = r.number("momentum", 0.0, 1.0, false, true, &config->momentum); !s.ok()) return s;
  return r.number("weight_decay", 0.0, kInf, false, false, &config->weight_decay);
}

// Defaults depend on the dataset: spirals are 2-D with 3 arms, the teacher problem is
// 20-D with 10 classes; a CSV file decides its own shape.
Status read_dataset(Reader& r, MlpDatasetSpec* spec) {
  std::string name = "spirals";
  if (Status s = r.text("dataset", &name); !s.ok()) return s;
  *spec = MlpDatasetSpec{};  // the spirals defaults
  if (name == "teacher") {
    spec->kind = MlpDatasetKind::kTeacher;
    spec->samples = 20000;
    spec->classes = 10;
    spec->features = 20;
    spec->noise = 0.0;
  } else if (name != "spirals") {
    spec->kind = MlpDatasetKind::kCsv;
    spec->csv_path = name;
  }
  int features = spec->features;
  if (Status s = r.integer("features", 1, 1'000'000, &features); !s.ok()) return s;
  if (spec->kind == MlpDatasetKind::kSpirals && features != 2) {
    return r.blame(
        "features",
        Status::BadInput("hyperparameter 'features' must be 2 for the spirals dataset, got " +
                         std::to_string(features)));
  }
  spec->features = features;
  if (Status s = r.integer("samples", 10, 100'000'000, &spec->samples); !s.ok()) return s;
  if (Status s = r.integer("classes", 2, 100'000, &spec->classes); !s.ok()) return s;
  if (Status s = r.number("noise", 0.0, 1e6, false, false, &spec->noise); !s.ok()) return s;
  if (Status s = r.number("val_fraction", 0.0, 0.9, true, false, &spec->val_fraction); !s.ok()) {
    return s;
  }
  if (spec->kind != MlpDatasetKind::kCsv &&
      static_cast<double>(spec->samples) * spec->features > 2e9) {
    // The one that was given made it exceed: the other is its dataset's default.
    const char* key = r.has("features") && !r.has("samples") ? "features" : "samples";
    return r.blame(key, Status::BadInput("hyperparameters 'samples' × 'features' must stay below "
                                         "2e9, got " +
                                         std::to_string(spec->samples) + " × " +
                                         std::to_string(spec->features)));
  }
  return Status::Ok();
}

Result<MlpHparams> parse(const Json& hparams, Reader& r) {
  if (!hparams.is_object()) {
    return Status::BadInput("hyperparameters must be a JSON object, got " + hparams.dump());
  }
  if (Status s = check_known_keys(hparams, r); !s.ok()) return s;
  MlpHparams hp;
  if (Status s = read_optimizer(r, &hp.optimizer); !s.ok()) return s;
  if (Status s = r.integer("hidden", 1, 1 << 16, &hp.hidden); !s.ok()) return s;
  if (Status s = r.integer("layers", 0, 64, &hp.layers); !s.ok()) return s;
  if (Status s = r.integer("batch_size", 1, 1 << 20, &hp.batch_size); !s.ok()) return s;
  if (Status s = read_dataset(r, &hp.data); !s.ok()) return s;
  if (r.has("data_seed")) {
    uint64_t data_seed = 0;
    if (Status s = r.integer("data_seed", 0, std::numeric_limits<int64_t>::max(), &data_seed);
        !s.ok()) {
      return s;
    }
    hp.data_seed = data_seed;
  }
  if (Status s = r.integer("threads", 0, 1024, &hp.threads); !s.ok()) return s;
  std::string allreduce = "overlap";
  if (Status s = r.text("allreduce", &allreduce); !s.ok()) return s;
  if (allreduce != "overlap" && allreduce != "after_backward")
    return r.blame("allreduce",
                   bad("allreduce", "\"overlap\" or \"after_backward\"", Json(allreduce)));
  hp.overlap_allreduce = allreduce == "overlap";
  if (Status s = r.integer("bucket_kb", 1, 1 << 20, &hp.bucket_kb); !s.ok()) return s;
  if (Status s = r.number("collective_timeout", 0, 86400, true, false, &hp.collective_timeout);
      !s.ok()) {
    return s;
  }
  std::string device = "auto";  // see MlpDevice
  if (Status s = r.text("device", &device); !s.ok()) return s;
  if (device == "auto")
    hp.device = MlpDevice::kAuto;
  else if (device == "cpu")
    hp.device = MlpDevice::kCpu;
  else if (device == "cuda")
    hp.device = MlpDevice::kCuda;
  else
    return r.blame("device", bad("device", "\"auto\", \"cpu\" or \"cuda\"", Json(device)));
  return hp;
}

}  // namespace

Result<MlpHparams> MlpHparams::from_json(const Json& hparams, std::string* key_at_fault) {
  Reader r(hparams);
  Result<MlpHparams> hp = parse(hparams, r);
  if (!hp.ok() && key_at_fault != nullptr) *key_at_fault = r.failed_key();
  return hp;
}

}  // namespace cairn
