#include "common/sealed_text.h"

#include "common/sha256.h"

namespace cairn {

namespace {

constexpr std::string_view kEnd = "end ";
constexpr size_t kHexDigits = 64;  // SHA-256
constexpr size_t kEndLine = kEnd.size() + kHexDigits + 1;

}  // namespace

void seal(std::string& text) {
  const std::string check = sha256_hex(text);
  text.reserve(text.size() + kEndLine);
  text += kEnd;
  text += check;
  text += '\n';
}

std::optional<std::string_view> unseal(std::string_view file_text) {
  if (file_text.size() < kEndLine) return std::nullopt;
  const std::string_view body = file_text.substr(0, file_text.size() - kEndLine);
  const std::string_view end = file_text.substr(body.size());
  // The hash is compared as written by seal(): lowercase hex, nothing around it.
  if (end.substr(0, kEnd.size()) != kEnd || end.back() != '\n' ||
      end.substr(kEnd.size(), kHexDigits) != sha256_hex(body))
    return std::nullopt;
  return body;
}

}  // namespace cairn
