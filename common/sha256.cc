#include "common/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file_util.h"

namespace cairn {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
}
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  EVP_DigestUpdate(impl_->ctx, data, size);
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex_digest();
}

Result<std::string> sha256_file(const std::filesystem::path& file, uint64_t* size) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Io("cannot open " + file.string() + ": " + std::strerror(errno));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return sha256_fd(fd.get(), file.string(), size);
}

Result<std::string> sha256_fd(int fd, const std::string& what, uint64_t* size) {
  Sha256 h;
  char* buf = thread_io_buffer();
  uint64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, kIoBufferSize);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;
    h.update(buf, static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  if (size) *size = total;
  return h.hex_digest();
}

}  // namespace cairn
