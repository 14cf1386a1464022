#include "trainer/mlp_checkpoint.h"

#include <bit>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include "common/file_util.h"
#include "common/sha256.h"

namespace cairn {
namespace {

static_assert(std::endian::native == std::endian::little,
              "mlp.ckpt is little-endian; a big-endian build needs byte swapping here");

constexpr std::string_view kMagic = "CAIRNMLP";
constexpr size_t kHeaderBytes = 80;
constexpr size_t kDigestBytes = 64;

class ByteWriter {
 public:
  template <typename T>
  void put(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_floats(const std::vector<float>& values) {
    bytes_.append(reinterpret_cast<const char*>(values.data()), sizeof(float) * values.size());
  }
  void put_text(std::string_view text) { bytes_.append(text); }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Reads fields in order; the caller checks sizes before reading past the header.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::vector<float> get_floats(uint64_t count) {
    std::vector<float> values(count);
    std::memcpy(values.data(), bytes_.data() + offset_, sizeof(float) * count);
    offset_ += sizeof(float) * count;
    return values;
  }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

Status corrupt(const std::filesystem::path& file, const std::string& why) {
  return Status::Corrupt("checkpoint " + file.string() + " is corrupt: " + why);
}

}  // namespace

Status write_mlp_checkpoint(const std::filesystem::path& file, const MlpCheckpoint& c) {
  ByteWriter w;
  w.put_text(kMagic);
  w.put<uint32_t>(kMlpCheckpointVersion);
  w.put<uint32_t>(c.shape.inputs);
  w.put<uint32_t>(c.shape.hidden);
  w.put<uint32_t>(c.shape.layers);
  w.put<uint32_t>(c.shape.classes);
  w.put<uint32_t>(static_cast<uint32_t>(c.optimizer));
  w.put<uint64_t>(c.seed);
  w.put<uint64_t>(c.data_seed);
  w.put<int64_t>(c.epochs_completed);
  w.put<int64_t>(c.optimizer_steps);
  w.put<uint64_t>(c.weights.size());
  w.put<uint64_t>(c.optimizer_state.size());
  w.put_floats(c.weights);
  w.put_floats(c.optimizer_state);
  const std::string digest = sha256_hex(w.bytes());
  w.put_text(digest);
  return write_file_atomic(file, w.bytes());
}

Result<MlpCheckpoint> read_mlp_checkpoint(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    return Status::NotFound("no checkpoint at " + file.string());
  }
  auto content = read_file(file);
  if (!content.ok()) return content.status();
  const std::string_view bytes = *content;
  if (bytes.size() < kHeaderBytes + kDigestBytes || bytes.substr(0, kMagic.size()) != kMagic) {
    return corrupt(file, "not a builtin:mlp checkpoint (bad magic or too short)");
  }
  ByteReader r(bytes.substr(kMagic.size()));
  const uint32_t version = r.get<uint32_t>();
  if (version != kMlpCheckpointVersion) {
    return Status::BadInput("checkpoint " + file.string() + " has format version " +
                            std::to_string(version) + "; this cairn reads version " +
                            std::to_string(kMlpCheckpointVersion));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - kDigestBytes);
  if (sha256_hex(body) != bytes.substr(body.size())) {
    return corrupt(file, "SHA-256 checksum mismatch");
  }
  MlpCheckpoint c;
  c.shape.inputs = static_cast<int>(r.get<uint32_t>());
  c.shape.hidden = static_cast<int>(r.get<uint32_t>());
  c.shape.layers = static_cast<int>(r.get<uint32_t>());
  c.shape.classes = static_cast<int>(r.get<uint32_t>());
  c.optimizer = static_cast<MlpOptimizerKind>(r.get<uint32_t>());
  c.seed = r.get<uint64_t>();
  c.data_seed = r.get<uint64_t>();
  c.epochs_completed = r.get<int64_t>();
  c.optimizer_steps = r.get<int64_t>();
  const uint64_t weight_count = r.get<uint64_t>();
  const uint64_t state_count = r.get<uint64_t>();
  const uint64_t payload = body.size() - kHeaderBytes;
  if (weight_count > payload / sizeof(float) || state_count > payload / sizeof(float) ||
      (weight_count + state_count) * sizeof(float) != payload) {
    return corrupt(file, "payload size does not match the header");
  }
  c.weights = r.get_floats(weight_count);
  c.optimizer_state = r.get_floats(state_count);
  return c;
}

}  // namespace cairn
