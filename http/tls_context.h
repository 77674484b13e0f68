// The server side of HTTPS for INAC's API server (http/http_server.h): an OpenSSL 3 context
// loaded from a PEM certificate chain and a PEM private key, and the sessions it opens on
// accepted sockets. Policy, fixed here rather than configurable:
//   - TLS 1.2 minimum (TLS 1.3 preferred by OpenSSL); for TLS 1.2 only ECDHE key exchange with
//     AEAD ciphers (AES-GCM, ChaCha20-Poly1305: Mozilla's "intermediate" list without DHE), in the
//     server's order of preference;
//   - no renegotiation (a TLS 1.2 client that asks is refused), no compression;
//   - ALPN: "http/1.1" when the client offers it; a client that offers only other protocols
//     (h2) goes on without ALPN rather than failing;
//   - an encrypted private key is refused (OpenSSL is never allowed to prompt for a passphrase);
//   - the certificate and key are read once, by Load: rotating them means restarting the server.
// A session's socket I/O uses send(MSG_NOSIGNAL)/recv (never write()), so a peer that vanishes
// mid-write cannot raise SIGPIPE in the serving process.
//
// Thread safety: a TlsServerContext is immutable after Load and may create sessions from any
// thread; each SSL session belongs to the one thread that drives it (the server's event loop).
// OpenSSL's error queue is per thread: call DrainOpenSslErrors on the thread of the failed call.
#pragma once

#include <openssl/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace inac::http {

class TlsServerContext {
 public:
  // Loads `cert_file` (PEM: the server certificate first, then any intermediates) and `key_file`
  // (PEM, unencrypted). InvalidArgument naming the file and OpenSSL's reason when a file cannot
  // be read or holds no usable PEM certificate or key; FailedPrecondition when the key is not the
  // certificate's.
  static absl::StatusOr<std::unique_ptr<TlsServerContext>> Load(const std::string& cert_file,
                                                                const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // A server session in accept state on the connected, non-blocking socket `fd` (not owned: the
  // caller closes it after SSL_free). nullptr when OpenSSL is out of memory.
  SSL* NewSession(int fd) const;

 private:
  explicit TlsServerContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;  // owned
};

// The reasons in this thread's OpenSSL error queue, oldest first, joined by "; " (e.g. "no start
// line"); empty when the queue is empty. Clears the queue.
std::string DrainOpenSslErrors();

}  // namespace inac::http
