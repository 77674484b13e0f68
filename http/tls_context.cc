#include "http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace inac::http {
namespace {

// TLS 1.2 suites: ECDHE with AEAD only, the server's order (Mozilla "intermediate" minus DHE).
// TLS 1.3 suites are OpenSSL's defaults (all AEAD).
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// --- A socket BIO that never raises SIGPIPE: send(MSG_NOSIGNAL) instead of write().

int SocketOf(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int BioWrite(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  ssize_t r;
  do {
    r = ::send(SocketOf(b), data, static_cast<size_t>(n), MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return static_cast<int>(r);
}

int BioRead(BIO* b, char* out, int n) {
  BIO_clear_retry_flags(b);
  ssize_t r;
  do {
    r = ::recv(SocketOf(b), out, static_cast<size_t>(n), 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  // As OpenSSL's socket BIO: the end of the stream is flagged, so a peer that closes without
  // close_notify is "unexpected eof", not an unexplained syscall error.
  if (r == 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF);
  return static_cast<int>(r);
}

long BioCtrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing is buffered here
    case BIO_CTRL_EOF:
      return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    default:
      return 0;
  }
}

int BioCreate(BIO* b) {
  BIO_set_init(b, 0);
  return 1;
}

int BioDestroy(BIO*) { return 1; }  // the socket is not owned

BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "inac socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    BIO_meth_set_destroy(m, BioDestroy);
    return m;
  }();
  return method;
}

// ALPN: "http/1.1" when offered; otherwise no ALPN (rather than a fatal alert).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void*) {
  for (unsigned int i = 0; i < in_len;) {
    const unsigned int len = in[i];
    if (i + 1 + len > in_len) break;
    if (len == 8 && std::memcmp(in + i + 1, "http/1.1", 8) == 0) {
      *out = in + i + 1;
      *out_len = 8;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// Never asks for a passphrase (OpenSSL's default would prompt on the terminal).
int NoPassphrase(char*, int, int, void*) { return 0; }

// The whole file, or InvalidArgument naming it.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", what, " ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

}  // namespace

std::string DrainOpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string text;
    if (reason != nullptr) {
      text = reason;
    } else {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof(buf));
      text = buf;
    }
    if (!absl::StrContains(out, text)) absl::StrAppend(&out, out.empty() ? "" : "; ", text);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Load(
    const std::string& cert_file, const std::string& key_file) {
  ERR_clear_error();
  auto cert_text = ReadPem(cert_file, "certificate");
  if (!cert_text.ok()) return cert_text.status();
  auto key_text = ReadPem(key_file, "private key");
  if (!key_text.ok()) return key_text.status();

  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("TLS: cannot create a context: ", DrainOpenSslErrors()));
  }
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(
      c, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // Partial writes and a moving buffer: the server's output buffer is appended to between two
  // attempts; released buffers: an idle connection holds no 34 KiB of record buffers.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_set_cipher_list(c, kTls12Ciphers) != 1) {
    return absl::InternalError(absl::StrCat("TLS: cipher list: ", DrainOpenSslErrors()));
  }
  SSL_CTX_set_default_passwd_cb(c, NoPassphrase);
  SSL_CTX_set_alpn_select_cb(c, SelectAlpn, nullptr);

  if (SSL_CTX_use_certificate_chain_file(c, cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS certificate ", cert_file,
        ": not a PEM certificate chain (server certificate first): ", DrainOpenSslErrors()));
  }
  if (absl::StrContains(*key_text, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
      absl::StrContains(*key_text, "Proc-Type: 4,ENCRYPTED")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS private key ", key_file,
        ": the key is encrypted; give an unencrypted PEM key (readable by the controller only), "
        "e.g. `openssl pkey -in ENCRYPTED.pem -out key.pem`"));
  }
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(key_text->data(), static_cast<int>(key_text->size())));
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS private key ", key_file, ": not a PEM private key: ", DrainOpenSslErrors()));
  }
  X509* leaf = SSL_CTX_get0_certificate(c);
  if (leaf == nullptr || X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError(absl::StrCat("TLS private key ", key_file,
                                                      " does not match the certificate in ",
                                                      cert_file, " (key values mismatch)"));
  }
  if (SSL_CTX_use_PrivateKey(c, key.get()) != 1 || SSL_CTX_check_private_key(c) != 1) {
    return absl::FailedPreconditionError(absl::StrCat("TLS private key ", key_file,
                                                      " cannot be used with ", cert_file, ": ",
                                                      DrainOpenSslErrors()));
  }
  if (SocketMethod() == nullptr) {
    return absl::InternalError("TLS: cannot create the socket BIO method");
  }
  return std::unique_ptr<TlsServerContext>(new TlsServerContext(ctx.release()));
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

SSL* TlsServerContext::NewSession(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  BIO* bio = BIO_new(SocketMethod());
  if (bio == nullptr) {
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by the session
  SSL_set_accept_state(ssl);
  return ssl;
}

}  // namespace inac::http
