// SHA-256 of bytes and files (OpenSSL's EVP), as lowercase hex: the content address of
// everything in the object store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  std::string hex_digest();  // REQUIRES: called once.

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view bytes);
Result<std::string> sha256_file(const std::filesystem::path& file, uint64_t* size = nullptr);
// Hashes what is left to read of `fd`, from its current offset. `what` names it in errors.
Result<std::string> sha256_fd(int fd, const std::string& what, uint64_t* size = nullptr);

}  // namespace cairn
