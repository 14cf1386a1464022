#include "peer/beacon.h"

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
constexpr size_t kSignedBytes = kBeaconBytes - 32;

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
  out.push_back(static_cast<char>(kBeaconFormat));
  put16(out, b.protocol);
  out.append(reinterpret_cast<const char*>(b.address.data()), b.address.size());
  put16(out, b.port);
  out.append(reinterpret_cast<const char*>(b.key_id.data()), b.key_id.size());
  const auto ts = static_cast<uint64_t>(b.timestamp_ms);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(ts >> shift));
  out.append(reinterpret_cast<const char*>(b.nonce.data()), b.nonce.size());
  return out;
}

}  // namespace

std::string Beacon::address_text() const {
  return std::to_string(address[0]) + "." + std::to_string(address[1]) + "." +
         std::to_string(address[2]) + "." + std::to_string(address[3]) + ":" + std::to_string(port);
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
  // Structure first, from the fixed layout alone: nothing is parsed beyond 77 bytes.
  if (d.size() < 5 || std::memcmp(d.data(), kMagic, 4) != 0)
    return drop(BeaconDrop::kMalformed,
                "not a cairn beacon (" + std::to_string(d.size()) + " bytes, no magic)");
  if (static_cast<uint8_t>(d[4]) != kBeaconFormat)
    return drop(BeaconDrop::kFormat, "beacon format " + std::to_string(static_cast<uint8_t>(d[4])) +
                                         ", this cairn reads format " +
                                         std::to_string(kBeaconFormat) +
                                         " (run the same cairn on every machine)");
  if (d.size() != kBeaconBytes)
    return drop(BeaconDrop::kMalformed, "beacon of " + std::to_string(d.size()) +
                                            " bytes, format 1 has " + std::to_string(kBeaconBytes));
  Beacon& b = v.beacon;
  b.protocol = static_cast<uint16_t>(get(d, 5, 2));
  b.address = get_bytes<4>(d, 7);
  b.port = static_cast<uint16_t>(get(d, 11, 2));
  b.key_id = get_bytes<8>(d, 13);
  b.timestamp_ms = static_cast<int64_t>(get(d, 21, 8));
  b.nonce = get_bytes<16>(d, 29);
  if (key_none_)
    return drop(BeaconDrop::kOtherKey,
                "key id " + b.key_id_hex() + ", this cairn has no cluster key (--key-file)");
  if (b.key_id != key_id_)
    return drop(BeaconDrop::kOtherKey,
                "key id " + b.key_id_hex() + ", ours is " + hex(key_id_.data(), key_id_.size()));
  const std::string mac = hmac(subkey_, d.substr(0, kSignedBytes));
  if (CRYPTO_memcmp(mac.data(), d.data() + kSignedBytes, 32) != 0)
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
