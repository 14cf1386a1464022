#include "peer/tls_session.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include "common/sha256.h"

namespace cairn {

namespace {

// TLS_AES_128_GCM_SHA256's code point (RFC 8446 B.4).
constexpr unsigned char kCipherId[] = {0x13, 0x01};
constexpr const char* kCipherName = "TLS_AES_128_GCM_SHA256";
// The session id context of the contexts and of the PSK sessions: OpenSSL refuses a session
// whose context differs from the connection's.
constexpr unsigned char kSessionContext[] = {'c', 'a', 'i', 'r', 'n', '-', 'p', 'e', 'e', 'r'};

std::string derive_psk(const ClusterKey& key) {
  const std::string hex = sha256_hex("cairn cluster psk 1" + key.bytes);
  std::string psk;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    psk.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return psk;
}

// A session carrying the PSK, as both callbacks hand it to OpenSSL.
SSL_SESSION* psk_session(SSL* ssl, const std::string& psk) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kCipherId);
  if (!cipher) return nullptr;
  SSL_SESSION* session = SSL_SESSION_new();
  if (!session) return nullptr;
  if (!SSL_SESSION_set1_master_key(session, reinterpret_cast<const unsigned char*>(psk.data()),
                                   psk.size()) ||
      !SSL_SESSION_set_cipher(session, cipher) ||
      !SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) ||
      !SSL_SESSION_set1_id_context(session, kSessionContext, sizeof kSessionContext)) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

int use_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* id_len,
                SSL_SESSION** out) {
  *out = nullptr;
  TlsSession* session = TlsSession::of(ssl);
  if (!session) return 0;
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kCipherId);
  // Called again after a HelloRetryRequest with the negotiated hash: ours or nothing.
  if (md && cipher && md != SSL_CIPHER_get_handshake_digest(cipher)) return 1;
  *out = psk_session(ssl, session->context().psk());
  if (!*out) return 0;
  const std::string& key_id = session->context().key().id;
  *id = reinterpret_cast<const unsigned char*>(key_id.data());
  *id_len = key_id.size();
  return 1;
}

int find_session(SSL* ssl, const unsigned char* identity, size_t identity_len, SSL_SESSION** out) {
  *out = nullptr;
  TlsSession* session = TlsSession::of(ssl);
  if (!session) return 0;
  // Shown in logs: printable characters only, bounded.
  std::string offered;
  for (size_t i = 0; i < identity_len && offered.size() < 64; ++i) {
    const char c = static_cast<char>(identity[i]);
    offered.push_back(c >= 0x21 && c <= 0x7e ? c : '?');
  }
  session->set_offered_key_id(offered);
  if (offered != session->context().key().id) return 1;  // no session: the handshake fails
  *out = psk_session(ssl, session->context().psk());
  return *out ? 1 : 0;
}

int refuse_certificates(int /*preverify_ok*/, X509_STORE_CTX* /*ctx*/) {
  return 0;
}

}  // namespace

std::string take_openssl_errors(const std::string& fallback) {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = ERR_reason_error_string(e);
    if (!text.empty()) text += "; ";
    text += reason ? reason : buf;
  }
  return text.empty() ? fallback : text;
}

Result<std::shared_ptr<TlsContext>> TlsContext::make(Side side, const ClusterKey& key) {
  SSL_CTX* ctx = SSL_CTX_new(side == Side::kClient ? TLS_client_method() : TLS_server_method());
  if (!ctx) return Status::Failed(take_openssl_errors("cannot make a TLS context"));
  bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) &&
            SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) &&
            SSL_CTX_set_ciphersuites(ctx, kCipherName);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // OpenSSL wants one for any server that may verify; the value is ours alone.
  ok = ok && SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext);
  if (side == Side::kClient) {
    // A server's certificate is never accepted: only the cluster key authenticates.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, refuse_certificates);
    SSL_CTX_set_psk_use_session_callback(ctx, use_session);
  } else {
    SSL_CTX_set_psk_find_session_callback(ctx, find_session);
  }
  if (!ok) {
    SSL_CTX_free(ctx);
    return Status::Failed(take_openssl_errors("cannot configure TLS 1.3"));
  }
  return std::shared_ptr<TlsContext>(new TlsContext(side, key, derive_psk(key), ctx));
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

Result<std::unique_ptr<TlsSession>> TlsSession::make(std::shared_ptr<TlsContext> context, int fd) {
  SSL* ssl = SSL_new(context->get());
  if (!ssl) return Status::Failed(take_openssl_errors("cannot make a TLS session"));
  std::unique_ptr<TlsSession> session(new TlsSession(std::move(context), ssl));
  SSL_set_app_data(ssl, session.get());
  if (!SSL_set_fd(ssl, fd)) return Status::Failed(take_openssl_errors("cannot use the socket"));
  if (session->context().side() == TlsContext::Side::kClient)
    SSL_set_connect_state(ssl);
  else
    SSL_set_accept_state(ssl);
  return session;
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);
}

TlsSession* TlsSession::of(SSL* ssl) {
  return static_cast<TlsSession*>(SSL_get_app_data(ssl));
}

bool TlsSession::used_cluster_key() const {
  return SSL_session_reused(ssl_) == 1 && SSL_version(ssl_) == TLS1_3_VERSION;
}

}  // namespace cairn
