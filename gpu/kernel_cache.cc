#include "gpu/kernel_cache.h"

#include <cstdlib>
#include <system_error>

#include "common/file_util.h"
#include "common/sealed_text.h"
#include "common/sha256.h"

namespace cairn::kernel_cache {
namespace fs = std::filesystem;

fs::path directory() {
  const char* text = std::getenv("CAIRN_KERNEL_CACHE");
  return text && *text ? fs::path(text) : fs::path();
}

fs::path entry(const fs::path& dir, std::string_view key) {
  return dir / (sha256_hex(key) + ".image");
}

std::optional<std::string> load(const fs::path& dir, std::string_view key, std::string* problem) {
  const fs::path file = entry(dir, key);
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  auto text = read_file(file);
  if (!text.ok()) {
    *problem = "cannot read the cached kernels " + file.string() + ": " + text.status().message();
    return std::nullopt;
  }
  // The key is sealed in with the image: a file that holds another key's image (a rename
  // gone wrong, a hand-copied cache) is as unusable as a damaged one.
  const std::optional<std::string_view> body = unseal(*text);
  const std::string header = std::string(key) + '\n';
  if (!body || !body->starts_with(header)) {
    *problem = "the cached kernels " + file.string() + " are damaged; compiling them again";
    fs::remove(file, ec);
    return std::nullopt;
  }
  return std::string(body->substr(header.size()));
}

void save(const fs::path& dir, std::string_view key, std::string_view image) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return;
  std::string text = std::string(key) + '\n';
  text.append(image);
  seal(text);
  (void)write_file_atomic(entry(dir, key), text);
}

}  // namespace cairn::kernel_cache
