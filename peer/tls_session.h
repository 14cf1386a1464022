// TLS 1.3 with the cluster key as an external pre-shared key (RFC 8446 §2.2, OpenSSL's
// SSL_CTX_set_psk_use_session_callback / SSL_CTX_set_psk_find_session_callback), with
// ephemeral Diffie-Hellman on top (psk_dhe_ke: a key stolen later does not decrypt recorded
// traffic). One cipher suite, TLS_AES_128_GCM_SHA256; no certificates, no session tickets,
// no resumption. The PSK identity is the key id (cluster_key.h), so an agent can say which
// key a refused peer offered; the PSK itself is SHA-256("cairn cluster psk 1" ‖ key bytes),
// 32 bytes whatever the key file's length.
//
// A handshake succeeds only when both ends hold the same key: the server finds no session
// for another identity, and having no certificate it fails the handshake; the client
// accepts no certificate and checks that the PSK was used. So no byte of application data is
// read from an unauthenticated peer.
//
// Thread-safety: a TlsContext may be shared by threads once made (OpenSSL's SSL_CTX is);
// each TlsSession belongs to one thread at a time.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "peer/cluster_key.h"

namespace cairn {

class TlsContext {
 public:
  enum class Side { kClient, kServer };
  static Result<std::shared_ptr<TlsContext>> make(Side side, const ClusterKey& key);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }
  Side side() const { return side_; }
  const ClusterKey& key() const { return key_; }
  const std::string& psk() const { return psk_; }

 private:
  TlsContext(Side side, ClusterKey key, std::string psk, SSL_CTX* ctx)
      : side_(side), key_(std::move(key)), psk_(std::move(psk)), ctx_(ctx) {}
  Side side_;
  ClusterKey key_;
  std::string psk_;
  SSL_CTX* ctx_;
};

// One end of a TLS connection over a socket it does not own. What the PSK callbacks saw is
// kept here, so a failed handshake can be explained.
class TlsSession {
 public:
  static Result<std::unique_ptr<TlsSession>> make(std::shared_ptr<TlsContext> context, int fd);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  SSL* ssl() const { return ssl_; }
  const TlsContext& context() const { return *context_; }
  // Server: the key id the client offered ("" when it offered none).
  const std::string& offered_key_id() const { return offered_key_id_; }
  // Whether the handshake used the cluster key (checked by both sides after it).
  bool used_cluster_key() const;

  // The OpenSSL callbacks' view of a session (internal).
  static TlsSession* of(SSL* ssl);
  void set_offered_key_id(std::string id) { offered_key_id_ = std::move(id); }

 private:
  TlsSession(std::shared_ptr<TlsContext> context, SSL* ssl)
      : context_(std::move(context)), ssl_(ssl) {}
  std::shared_ptr<TlsContext> context_;
  SSL* ssl_;
  std::string offered_key_id_;
};

// OpenSSL's error queue as one line (emptying it), or `fallback` when it is empty.
std::string take_openssl_errors(const std::string& fallback);

}  // namespace cairn
