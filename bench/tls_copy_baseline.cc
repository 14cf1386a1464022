// The baseline of bench/peer_checkpoint_bench.py: what shipping a checkpoint costs without
// cairn. One file through a TLS 1.3 stream with cairn's cipher suite (TLS_AES_128_GCM_SHA256,
// an external PSK as cairn uses, psk_dhe_ke), hashed with SHA-256 and fsynced on the
// receiving side. OpenSSL only, no cairn code.
//
//   g++ -O2 -std=c++20 bench/tls_copy_baseline.cc -o /tmp/tls_copy_baseline -lssl -lcrypto
//   tls_copy_baseline serve OUT      # prints its port, receives one file into OUT, prints
//                                    # "BYTES SHA256" once OUT is fsynced
//   tls_copy_baseline send PORT FILE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

const unsigned char kKey[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
const char kIdentity[] = "bench";

SSL_SESSION* psk_session(SSL* ssl) {
  const unsigned char id[] = {0x13, 0x01};  // TLS_AES_128_GCM_SHA256
  SSL_SESSION* s = SSL_SESSION_new();
  SSL_SESSION_set1_master_key(s, kKey, sizeof kKey);
  SSL_SESSION_set_cipher(s, SSL_CIPHER_find(ssl, id));
  SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION);
  return s;
}

int use_session(SSL* ssl, const EVP_MD*, const unsigned char** id, size_t* len,
                SSL_SESSION** sess) {
  *id = reinterpret_cast<const unsigned char*>(kIdentity);
  *len = std::strlen(kIdentity);
  *sess = psk_session(ssl);
  return 1;
}

int find_session(SSL* ssl, const unsigned char* id, size_t len, SSL_SESSION** sess) {
  *sess = len == std::strlen(kIdentity) && std::memcmp(id, kIdentity, len) == 0 ? psk_session(ssl)
                                                                                : nullptr;
  return 1;
}

SSL_CTX* context(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  SSL_CTX_set_num_tickets(ctx, 0);  // as cairn: no session tickets
  if (server)
    SSL_CTX_set_psk_find_session_callback(ctx, find_session);
  else
    SSL_CTX_set_psk_use_session_callback(ctx, use_session);
  return ctx;
}

int serve(const char* out) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0)
    return 1;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  int fd = accept(listener, nullptr, nullptr);
  SSL_CTX* ctx = context(true);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) return 1;
  int file = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  unsigned long long total = 0;
  for (;;) {
    const int n = SSL_read(ssl, buf.data(), static_cast<int>(buf.size()));
    if (n <= 0) break;
    EVP_DigestUpdate(md, buf.data(), n);
    for (int off = 0; off < n;) {
      const ssize_t w = write(file, buf.data() + off, n - off);
      if (w <= 0) return 1;
      off += static_cast<int>(w);
    }
    total += n;
  }
  if (fsync(file) != 0) return 1;
  close(file);
  SSL_shutdown(ssl);  // after the fsync: the sender waits for it
  unsigned char digest[32];
  unsigned int dlen = 0;
  EVP_DigestFinal_ex(md, digest, &dlen);
  std::printf("%llu ", total);
  for (unsigned i = 0; i < dlen; ++i) std::printf("%02x", digest[i]);
  std::printf("\n");
  return 0;
}

int send_file(int port, const char* path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 1;
  SSL_CTX* ctx = context(false);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) != 1) return 1;
  int file = open(path, O_RDONLY);
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = read(file, buf.data(), buf.size());
    if (n <= 0) break;
    if (SSL_write(ssl, buf.data(), static_cast<int>(n)) != n) return 1;
  }
  SSL_shutdown(ssl);
  // Until the receiver's close_notify, sent once its copy is fsynced: the sender's time is
  // the whole shipment's.
  while (SSL_read(ssl, buf.data(), static_cast<int>(buf.size())) > 0) {
  }
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "serve") return serve(argv[2]);
  if (argc == 4 && std::string(argv[1]) == "send") return send_file(std::atoi(argv[2]), argv[3]);
  std::fprintf(stderr, "usage: tls_copy_baseline serve OUT | send PORT FILE\n");
  return 2;
}
