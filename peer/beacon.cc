#include "peer/beacon.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <chrono>
#include <cstring>
#include <memory>

namespace cairn {

namespace {

constexpr char kMagic[4] = {'C', 'R', 'N', 'B'};
constexpr size_t kMacBytes = 32;

size_t beacon_bytes(BeaconFamily family) {
  return family == BeaconFamily::kIpv6 ? kBeacon6Bytes : kBeaconBytes;
}

void put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

uint64_t get(std::string_view in, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[at + i]);
  return v;
}

template <size_t N>
std::array<uint8_t, N> get_bytes(std::string_view in, size_t at) {
  std::array<uint8_t, N> out{};
  std::memcpy(out.data(), in.data() + at, N);
  return out;
}

std::string hex(const uint8_t* bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

std::array<uint8_t, 8> key_id_bytes(const ClusterKey& key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.bytes.data()), key.bytes.size(), digest);
  std::array<uint8_t, 8> id{};
  std::memcpy(id.data(), digest, id.size());
  return id;
}

std::string hmac(const std::string& subkey, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), subkey.data(), static_cast<int>(subkey.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &length);
  return std::string(reinterpret_cast<char*>(out), length);
}

std::string encode_signed(const Beacon& b) {
  std::string out(kMagic, 4);
  const bool v6 = b.family == BeaconFamily::kIpv6;
  out.push_back(static_cast<char>(v6 ? kBeacon6Format : kBeaconFormat));
  put16(out, b.protocol);
  if (v6)
    out.append(reinterpret_cast<const char*>(b.address6.data()), b.address6.size());
  else
    out.append(reinterpret_cast<const char*>(b.address.data()), b.address.size());
  put16(out, b.port);
  out.append(reinterpret_cast<const char*>(b.key_id.data()), b.key_id.size());
  const auto ts = static_cast<uint64_t>(b.timestamp_ms);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(ts >> shift));
  out.append(reinterpret_cast<const char*>(b.nonce.data()), b.nonce.size());
  return out;
}

}  // namespace

std::string Beacon::host_text() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family == BeaconFamily::kIpv6)
    ::inet_ntop(AF_INET6, address6.data(), text, sizeof text);
  else
    ::inet_ntop(AF_INET, address.data(), text, sizeof text);
  return text;
}

std::string Beacon::address_text() const {
  if (family == BeaconFamily::kIpv6) return "[" + host_text() + "]:" + std::to_string(port);
  return host_text() + ":" + std::to_string(port);
}

bool Beacon::unspecified() const {
  const auto zero = [](const auto& bytes) {
    for (uint8_t b : bytes)
      if (b) return false;
    return true;
  };
  return family == BeaconFamily::kIpv6 ? zero(address6) : zero(address);
}

std::string Beacon::key_id_hex() const {
  return hex(key_id.data(), key_id.size());
}

const char* beacon_drop_name(BeaconDrop drop) {
  switch (drop) {
    case BeaconDrop::kMalformed:
      return "malformed";
    case BeaconDrop::kFormat:
      return "other format";
    case BeaconDrop::kOtherKey:
      return "other key";
    case BeaconDrop::kForged:
      return "forged";
    case BeaconDrop::kStale:
      return "stale";
    case BeaconDrop::kReplayed:
      return "replayed";
  }
  return "?";
}

std::string beacon_subkey(const ClusterKey& key) {
  static const char salt[] = "cairn beacon";
  static const char info[] = "cairn beacon hmac 1";
  std::string out(32, '\0');
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), &EVP_PKEY_CTX_free);
  size_t length = out.size();
  const bool ok =
      ctx && EVP_PKEY_derive_init(ctx.get()) > 0 &&
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_salt(ctx.get(), reinterpret_cast<const unsigned char*>(salt),
                                  sizeof salt - 1) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(),
                                 reinterpret_cast<const unsigned char*>(key.bytes.data()),
                                 static_cast<int>(key.bytes.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), reinterpret_cast<const unsigned char*>(info),
                                  sizeof info - 1) > 0 &&
      EVP_PKEY_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &length) > 0 &&
      length == out.size();
  // HKDF of a non-empty key cannot fail short of OpenSSL being broken; never fall back to a
  // subkey anyone could compute.
  if (!ok) std::abort();
  return out;
}

std::string seal_beacon(Beacon beacon, const ClusterKey& key) {
  beacon.key_id = key_id_bytes(key);
  std::string out = encode_signed(beacon);
  out += hmac(beacon_subkey(key), out);
  return out;
}

Result<Beacon> new_beacon(const ClusterKey& key, std::array<uint8_t, 4> address, uint16_t port,
                          uint16_t protocol, int64_t now_ms) {
  Beacon b;
  b.protocol = protocol;
  b.address = address;
  b.port = port;
  b.key_id = key_id_bytes(key);
  b.timestamp_ms = now_ms;
  if (RAND_bytes(b.nonce.data(), static_cast<int>(b.nonce.size())) != 1)
    return Status::Failed("no random bytes for a beacon nonce (RAND_bytes failed)");
  return b;
}

BeaconChecker::BeaconChecker(const ClusterKey& key)
    : subkey_(beacon_subkey(key)), key_id_(key_id_bytes(key)), key_none_(key.none()) {}

BeaconChecker::Verdict BeaconChecker::check(std::string_view d, int64_t now_ms) {
  Verdict v;
  auto drop = [&](BeaconDrop why, std::string detail) {
    v.drop = why;
    v.detail = std::move(detail);
    return v;
  };
  // Structure first, from the fixed layout alone: nothing is parsed beyond the format's size.
  if (d.size() < 5 || std::memcmp(d.data(), kMagic, 4) != 0)
    return drop(BeaconDrop::kMalformed,
                "not a cairn beacon (" + std::to_string(d.size()) + " bytes, no magic)");
  const uint8_t format = static_cast<uint8_t>(d[4]);
  if (format != kBeaconFormat && format != kBeacon6Format)
    return drop(BeaconDrop::kFormat,
                "beacon format " + std::to_string(format) + ", this cairn reads formats " +
                    std::to_string(kBeaconFormat) + " and " + std::to_string(kBeacon6Format) +
                    " (run the same cairn on every machine)");
  Beacon& b = v.beacon;
  b.family = format == kBeacon6Format ? BeaconFamily::kIpv6 : BeaconFamily::kIpv4;
  const size_t size = beacon_bytes(b.family);
  if (d.size() != size)
    return drop(BeaconDrop::kMalformed, "beacon of " + std::to_string(d.size()) +
                                            " bytes, format " + std::to_string(format) + " has " +
                                            std::to_string(size));
  // The fields after the address sit 12 bytes further in format 2.
  const size_t shift = b.family == BeaconFamily::kIpv6 ? 12 : 0;
  b.protocol = static_cast<uint16_t>(get(d, 5, 2));
  if (b.family == BeaconFamily::kIpv6)
    b.address6 = get_bytes<16>(d, 7);
  else
    b.address = get_bytes<4>(d, 7);
  b.port = static_cast<uint16_t>(get(d, 11 + shift, 2));
  b.key_id = get_bytes<8>(d, 13 + shift);
  b.timestamp_ms = static_cast<int64_t>(get(d, 21 + shift, 8));
  b.nonce = get_bytes<16>(d, 29 + shift);
  const size_t signed_bytes = size - kMacBytes;
  if (key_none_)
    return drop(BeaconDrop::kOtherKey,
                "key id " + b.key_id_hex() + ", this cairn has no cluster key (--key-file)");
  if (b.key_id != key_id_)
    return drop(BeaconDrop::kOtherKey,
                "key id " + b.key_id_hex() + ", ours is " + hex(key_id_.data(), key_id_.size()));
  const std::string mac = hmac(subkey_, d.substr(0, signed_bytes));
  if (CRYPTO_memcmp(mac.data(), d.data() + signed_bytes, kMacBytes) != 0)
    return drop(BeaconDrop::kForged, "bad HMAC for key id " + b.key_id_hex());
  // Authentic from here on: a key holder sent these bytes once.
  const int64_t skew = b.timestamp_ms - now_ms;  // both well inside int64 for real clocks
  if (b.timestamp_ms < 0 || skew > kBeaconWindowMs || skew < -kBeaconWindowMs)
    return drop(BeaconDrop::kStale,
                "timestamp " + std::to_string(b.timestamp_ms < 0 ? 0 : skew / 1000) +
                    " s from this machine's clock, the window is ±" +
                    std::to_string(kBeaconWindowMs / 1000) + " s (are the clocks synchronised?)");
  while (!seen_order_.empty() &&
         (seen_order_.front().until_ms < now_ms || seen_order_.size() >= kBeaconNonceCacheSize)) {
    seen_.erase(seen_order_.front().nonce);
    seen_order_.pop_front();
  }
  std::string nonce(reinterpret_cast<const char*>(b.nonce.data()), b.nonce.size());
  if (seen_.count(nonce)) return drop(BeaconDrop::kReplayed, "nonce already seen");
  // Remembered until no copy of it can pass the timestamp check any more.
  seen_.insert(nonce);
  seen_order_.push_back({std::move(nonce), b.timestamp_ms + kBeaconWindowMs});
  v.accepted = true;
  return v;
}

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cairn
