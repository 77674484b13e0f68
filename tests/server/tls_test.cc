// HTTPS (docs/controller.md "TLS (HTTPS)"): the event-driven server over TLS (http/http_server.h,
// http/tls_context.h) against the production client (ApiClient over https://, the CA of a
// throwaway PKI from tests/fixtures/tls_certs.h) and raw OpenSSL clients for what ApiClient does
// not do (pipelining, old protocol versions, ALPN, renegotiation); hostile clients (plain HTTP,
// a TCP connection that never handshakes) on raw sockets. Then the listen rule (CheckListenRule,
// HttpApi::Bind); the configuration's "tls" object and its listen check are in
// tests/cli/serve_config_test.cc.
// No timed assertions: timeouts are short and the tests wait for outcomes, bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "http/http_server.h"
#include "northbound/api_client.h"
#include "northbound/http_api.h"
#include "tests/fixtures/tls_certs.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using fixtures::TlsTestFiles;

int ConnectTcp(int port, const char* address = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address, &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the peer closed the connection (within 20 s). Whatever it sent before is discarded.
bool ClosedByPeer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

// This thread's OpenSSL errors, and clears them.
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out;
}

// Blocks SIGPIPE in this thread while it lives and consumes one raised meanwhile: OpenSSL's
// socket BIO writes with write(), and a server that closes first (a refused connection) would
// otherwise kill the test process.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_;
  sigset_t old_;
};

// A blocking TLS client on a raw socket, for what ApiClient does not do. Use on one thread.
class RawTlsClient {
 public:
  // Connects to 127.0.0.1:`port` and handshakes, trusting `ca_file`; `configure` may change the
  // context first (protocol versions, ALPN). On failure ok() is false and error() says why.
  RawTlsClient(int port, const std::string& ca_file,
               const std::function<void(SSL_CTX*)>& configure = nullptr) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (configure) configure(ctx_);
    fd_ = ConnectTcp(port);
    if (fd_ < 0) {
      error_ = "connect failed";
      return;
    }
    timeval tv{0, 200000};  // reads wake up every 200 ms to check their deadline
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "127.0.0.1");
    ERR_clear_error();
    int r = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((r = SSL_connect(ssl_)) != 1 && std::chrono::steady_clock::now() < deadline) {
      const int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) break;
    }
    if (r != 1) error_ = absl::StrCat("handshake: ", OpenSslErrors());
    ok_ = r == 1;
  }
  ~RawTlsClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  SSL* ssl() { return ssl_; }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned int n = 0;
    SSL_get0_alpn_selected(ssl_, &p, &n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  bool Write(const std::string& bytes) {
    size_t written = 0;
    return SSL_write_ex(ssl_, bytes.data(), bytes.size(), &written) == 1 && written == bytes.size();
  }
  // Reads until `until` appeared `count` times, the peer closed, or 20 s passed.
  std::string Read(const std::string& until = "", int count = 1) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!until.empty()) {
        int seen = 0;
        for (size_t at = got.find(until); at != std::string::npos; at = got.find(until, at + 1)) {
          ++seen;
        }
        if (seen >= count) break;
      }
      char buf[4096];
      size_t n = 0;
      if (SSL_read_ex(ssl_, buf, sizeof(buf), &n) == 1) {
        got.append(buf, n);
        continue;
      }
      const int e = SSL_get_error(ssl_, 0);
      if (e == SSL_ERROR_ZERO_RETURN) break;
      if (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ERR_clear_error();
        continue;  // the 200 ms receive timeout
      }
      if (e != SSL_ERROR_WANT_READ) break;
    }
    return got;
  }

 private:
  ScopedNoSigpipe no_sigpipe_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
  std::string error_;
};

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = fixtures::WriteTlsTestFiles(dir_.path());
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *files;
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  http::HttpServerOptions TlsOptions() {
    http::HttpServerOptions options;
    options.tls_cert_file = files_.server_cert;
    options.tls_key_file = files_.server_key;
    return options;
  }
  // A TLS server on `host`:0 answering "<METHOD> <path>" (and a three-event stream on /stream).
  void Start(http::HttpServerOptions options, const std::string& host = "127.0.0.1") {
    server_ = std::make_unique<http::HttpServer>(
        options, [this](httplib::Request& req, httplib::Response& res) {
          handled_++;
          res.status = 200;
          if (req.path == "/stream") {
            res.set_chunked_content_provider(
                "text/event-stream", [](size_t offset, httplib::DataSink& sink) {
                  if (offset >= 3 * 12) {
                    sink.done();
                    return true;
                  }
                  const std::string event = absl::StrCat("data: e", offset / 12, "...\n\n");
                  return sink.write(event.data(), event.size());  // 12 bytes
                });
            return;
          }
          res.set_content(absl::StrCat(req.method, " ", req.path), "text/plain");
        });
    auto port = server_->Bind(host, 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    host_ = host;
    thread_ = std::thread([this] { server_->Serve(); });
  }
  std::unique_ptr<northbound::ApiClient> Client(const std::string& ca, bool keep_alive = false,
                                                const std::string& scheme = "https://") {
    northbound::ApiClientOptions options;
    options.server = absl::StrCat(scheme, host_, ":", port_);
    options.ca_cert_file = ca;
    options.keep_alive = keep_alive;
    options.timeout_ms = 20000;
    auto client = northbound::ApiClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
  // GET `path` over TLS with the CA: the body, or the error.
  std::string Get(const std::string& path) {
    auto client = Client(files_.ca_cert);
    if (client == nullptr) return "no client";
    auto reply = client->SendRaw({.target = path});
    if (!reply.ok()) return std::string(reply.status().message());
    return absl::StrCat(reply->http_status, " ", reply->body);
  }
  int OpenTcp() {
    int fd = ConnectTcp(port_);
    EXPECT_GE(fd, 0);
    fds_.push_back(fd);
    return fd;
  }

  TempDir dir_;
  TlsTestFiles files_;
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::atomic<int> handled_{0};
  std::vector<int> fds_;
};

TEST_F(TlsServerTest, AnswersOverTlsWithTheCaAndKeepsTheConnection) {
  Start(TlsOptions());
  ASSERT_TRUE(server_->tls());
  auto client = Client(files_.ca_cert, /*keep_alive=*/true);
  ASSERT_NE(client, nullptr);
  for (const char* path : {"/a", "/b", "/c"}) {
    auto reply = client->SendRaw({.target = path});
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->http_status, 200);
    EXPECT_EQ(reply->body, absl::StrCat("GET ", path));
  }
  EXPECT_EQ(server_->stats().accepted, 1);  // one TLS connection, kept alive
  EXPECT_EQ(server_->stats().tls_handshake_failures, 0);
  // A body goes through too (POST over TLS, Content-Length).
  auto post = client->SendRaw({.method = "POST", .target = "/p", .body = std::string(70000, 'x')});
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->body, "POST /p");
}

TEST_F(TlsServerTest, VerificationFailsWithoutTheRightCa) {
  Start(TlsOptions());
  // The system's trust store does not know the throwaway CA.
  auto client = Client("");
  ASSERT_NE(client, nullptr);
  auto reply = client->SendRaw({.target = "/a"});
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "certificate verify failed"))
      << reply.status();
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "--ca-cert")) << reply.status();
  // Another CA: refused too.
  auto other = Client(files_.other_ca_cert);
  ASSERT_NE(other, nullptr);
  reply = other->SendRaw({.target = "/a"});
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "certificate verify failed"))
      << reply.status();
  EXPECT_EQ(northbound::ExitCodeFor(reply.status()), 1);
  EXPECT_EQ(handled_, 0);  // nothing was sent to a server that did not verify
  // A CA file that is not PEM is refused when the client is made.
  northbound::ApiClientOptions bad;
  bad.server = absl::StrCat("https://127.0.0.1:", port_);
  bad.ca_cert_file = files_.not_pem;
  auto made = northbound::ApiClient::Create(bad);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(made.status().message(), files_.not_pem)) << made.status();
  bad.ca_cert_file = dir_.File("missing.pem");
  EXPECT_EQ(northbound::ApiClient::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsServerTest, TheServerNameMustBeInTheCertificate) {
  // 127.0.0.2 is loopback but not in the certificate (127.0.0.1, ::1, localhost).
  Start(TlsOptions(), "127.0.0.2");
  auto client = Client(files_.ca_cert);
  ASSERT_NE(client, nullptr);
  auto reply = client->SendRaw({.target = "/a"});
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "certificate verify failed"))
      << reply.status();
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "hostname mismatch")) << reply.status();
}

TEST_F(TlsServerTest, PlainHttpToTheTlsPortIsRefusedAndOthersAreServed) {
  Start(TlsOptions());
  // An http:// client is answered in plain HTTP: 400, naming the fix.
  auto plain = Client("", false, "http://");
  ASSERT_NE(plain, nullptr);
  auto reply = plain->SendRaw({.target = "/a"});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->http_status, 400);
  EXPECT_TRUE(absl::StrContains(reply->error_message(), "serves HTTPS")) << reply->body;
  // Bytes that are neither TLS nor HTTP: closed.
  int fd = OpenTcp();
  ASSERT_EQ(::send(fd, "hello\r\n\r\n", 9, MSG_NOSIGNAL), 9);
  EXPECT_TRUE(ClosedByPeer(fd));
  EXPECT_EQ(handled_, 0);
  EXPECT_GE(server_->stats().tls_handshake_failures, 2);
  // The server still serves TLS clients.
  EXPECT_EQ(Get("/after"), "200 GET /after");
}

TEST_F(TlsServerTest, AConnectionThatNeverHandshakesIsClosedAfterTheHeaderTimeout) {
  http::HttpServerOptions options = TlsOptions();
  options.header_timeout_ms = 300;
  Start(options);
  int silent = OpenTcp();   // connects and sends nothing
  int partial = OpenTcp();  // the first bytes of a TLS record, then nothing
  ASSERT_EQ(::send(partial, "\x16\x03\x01", 3, MSG_NOSIGNAL), 3);
  // Meanwhile other clients are served.
  EXPECT_EQ(Get("/meanwhile"), "200 GET /meanwhile");
  EXPECT_TRUE(ClosedByPeer(silent));
  EXPECT_TRUE(ClosedByPeer(partial));
  EXPECT_GE(server_->stats().timed_out, 2);
  EXPECT_EQ(Get("/after"), "200 GET /after");
}

TEST_F(TlsServerTest, PipelinedRequestsOverTlsAreAnsweredInOrder) {
  Start(TlsOptions());
  RawTlsClient client(port_, files_.ca_cert);
  ASSERT_TRUE(client.ok()) << client.error();
  // One TLS write holding three requests; the last closes the connection.
  ASSERT_TRUE(
      client.Write("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
                   "GET /two HTTP/1.1\r\nHost: x\r\n\r\n"
                   "GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string got = client.Read();  // until the server closes
  const size_t one = got.find("GET /one"), two = got.find("GET /two"),
               three = got.find("GET /three");
  ASSERT_NE(one, std::string::npos) << got;
  ASSERT_NE(two, std::string::npos) << got;
  ASSERT_NE(three, std::string::npos) << got;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
  EXPECT_EQ(SSL_get_shutdown(client.ssl()) & SSL_RECEIVED_SHUTDOWN, SSL_RECEIVED_SHUTDOWN)
      << "the server ends with close_notify";
}

TEST_F(TlsServerTest, StreamsOverTlsDeliverEveryEvent) {
  Start(TlsOptions());
  auto client = Client(files_.ca_cert);
  ASSERT_NE(client, nullptr);
  std::string received;
  auto status = client->Stream({.target = "/stream"}, nullptr, [&](std::string_view data) {
    received.append(data);
    return true;
  });
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(received, "data: e0...\n\ndata: e1...\n\ndata: e2...\n\n");
}

TEST_F(TlsServerTest, Tls12IsTheMinimumAndAlpnIsHttp11) {
  Start(TlsOptions());
  {
    RawTlsClient client(port_, files_.ca_cert);
    ASSERT_TRUE(client.ok()) << client.error();
    EXPECT_STREQ(SSL_get_version(client.ssl()), "TLSv1.3");
  }
  {
    RawTlsClient client(port_, files_.ca_cert, [](SSL_CTX* ctx) {
      SSL_CTX_set_security_level(ctx, 0);  // the client would offer TLS 1.1: the server refuses
      SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION);
      SSL_CTX_set_cipher_list(ctx, "ALL:@SECLEVEL=0");
    });
    EXPECT_FALSE(client.ok());
    // Refused for its version (not only for want of a common cipher).
    EXPECT_TRUE(absl::StrContains(client.error(), "protocol version")) << client.error();
  }
  {
    RawTlsClient client(port_, files_.ca_cert, [](SSL_CTX* ctx) {
      SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
      static const unsigned char kProtos[] = "\x02h2\x08http/1.1";
      SSL_CTX_set_alpn_protos(ctx, kProtos, sizeof(kProtos) - 1);
    });
    ASSERT_TRUE(client.ok()) << client.error();
    EXPECT_STREQ(SSL_get_version(client.ssl()), "TLSv1.2");
    EXPECT_EQ(client.alpn(), "http/1.1");
    // TLS 1.2 suites: ECDHE with an AEAD cipher.
    const std::string cipher = SSL_get_cipher_name(client.ssl());
    EXPECT_TRUE(absl::StartsWith(cipher, "ECDHE-")) << cipher;
    EXPECT_TRUE(absl::StrContains(cipher, "GCM") || absl::StrContains(cipher, "CHACHA20"))
        << cipher;
  }
  {
    RawTlsClient client(port_, files_.ca_cert, [](SSL_CTX* ctx) {
      static const unsigned char kProtos[] = "\x02h2";
      SSL_CTX_set_alpn_protos(ctx, kProtos, sizeof(kProtos) - 1);
    });
    ASSERT_TRUE(client.ok()) << client.error();  // no ALPN rather than a failure
    EXPECT_EQ(client.alpn(), "");
  }
  EXPECT_EQ(Get("/after"), "200 GET /after");
}

// OpenSSL 3 servers refuse client-initiated renegotiation unless told otherwise
// (SSL_OP_ALLOW_CLIENT_RENEGOTIATION); the server also sets SSL_OP_NO_RENEGOTIATION. This pins the
// behaviour, whichever of the two provides it.
TEST_F(TlsServerTest, RenegotiationIsRefused) {
  Start(TlsOptions());
  RawTlsClient client(port_, files_.ca_cert,
                      [](SSL_CTX* ctx) { SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); });
  ASSERT_TRUE(client.ok()) << client.error();
  ASSERT_EQ(SSL_renegotiate(client.ssl()), 1);
  int r = 0;
  for (int i = 0; i < 100 && (r = SSL_do_handshake(client.ssl())) != 1; ++i) {
    const int e = SSL_get_error(client.ssl(), r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE &&
        !(e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))) {
      break;
    }
  }
  const int error = SSL_get_error(client.ssl(), r);
  const std::string reason = OpenSslErrors();
  EXPECT_NE(r, 1) << "the server accepted a renegotiation";
  EXPECT_TRUE(absl::StrContains(reason, "no renegotiation")) << error << " " << reason;
  EXPECT_EQ(Get("/after"), "200 GET /after");
}

TEST_F(TlsServerTest, ConnectionCapsHoldOverTls) {
  http::HttpServerOptions options = TlsOptions();
  options.max_connections_per_client = 1;
  Start(options);
  auto first = std::make_unique<RawTlsClient>(port_, files_.ca_cert);
  ASSERT_TRUE(first->ok()) << first->error();
  // A second connection from the same address is closed before its handshake.
  RawTlsClient second(port_, files_.ca_cert);
  EXPECT_FALSE(second.ok());
  EXPECT_GE(server_->stats().refused, 1);
  // The first one is served; once it is gone there is room again.
  ASSERT_TRUE(first->Write("GET /first HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(absl::StrContains(first->Read(), "GET /first"));
  first.reset();
  std::string after;
  for (int i = 0; i < 200 && !absl::StartsWith(after, "200"); ++i) {
    after = Get("/after");  // the server may not have seen the close yet
    if (!absl::StartsWith(after, "200")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_EQ(after, "200 GET /after");
}

TEST_F(TlsServerTest, CertificateProblemsAreReportedByBindWithTheFile) {
  auto bind = [](const std::string& cert, const std::string& key) {
    http::HttpServerOptions options;
    options.tls_cert_file = cert;
    options.tls_key_file = key;
    http::HttpServer server(options, [](httplib::Request&, httplib::Response&) {});
    return server.Bind("127.0.0.1", 0).status();
  };
  absl::Status s = bind(dir_.File("missing.pem"), files_.server_key);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), dir_.File("missing.pem"))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "No such file")) << s;

  s = bind(files_.not_pem, files_.server_key);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), files_.not_pem)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no start line")) << s;  // OpenSSL's reason

  s = bind(files_.server_cert, files_.not_pem);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "private key " + files_.not_pem)) << s;

  s = bind(files_.server_cert, files_.other_key);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), files_.other_key)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "does not match")) << s;

  s = bind(files_.server_cert, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  // An encrypted key is refused, never prompted for.
  const std::string encrypted = dir_.File("encrypted-key.pem");
  {
    BIO* in = BIO_new_file(files_.server_key.c_str(), "r");
    EVP_PKEY* key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
    BIO_free(in);
    ASSERT_NE(key, nullptr);
    BIO* out = BIO_new_file(encrypted.c_str(), "w");
    static const char kPass[] = "passphrase";
    PEM_write_bio_PKCS8PrivateKey(out, key, EVP_aes_256_cbc(), kPass, sizeof(kPass) - 1, nullptr,
                                  nullptr);
    BIO_free(out);
    EVP_PKEY_free(key);
  }
  s = bind(files_.server_cert, encrypted);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "encrypted")) << s;

  EXPECT_TRUE(bind(files_.server_cert, files_.server_key).ok());
}

// The event stream of the real API over TLS: a second HttpApi (HTTPS) on the test controller.
TEST_F(TlsServerTest, TheApiEventStreamOverTls) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  ASSERT_GT(server.Submit(SmallLeafSpineJob("over-tls")), 0);
  northbound::HttpApiOptions options;
  options.tokens = DefaultTokens();
  options.threads = 4;
  options.server = TlsOptions();
  northbound::HttpApi api(server.controller().services(), options);
  auto port = api.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  std::thread serving([&api] { api.Serve(); });
  northbound::ApiClientOptions client_options;
  client_options.server = absl::StrCat("https://127.0.0.1:", *port);
  client_options.token = kViewerToken;
  client_options.ca_cert_file = files_.ca_cert;
  client_options.timeout_ms = 30000;
  auto client = northbound::ApiClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto jobs = (*client)->Call("GET", "/jobs");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::string received;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto status = (*client)->Stream({.target = "/api/v1/events/stream?since=0"}, nullptr,
                                  [&](std::string_view data) {
                                    received.append(data);
                                    return !absl::StrContains(received, "event: job_submitted") &&
                                           std::chrono::steady_clock::now() < deadline;
                                  });
  api.Stop();
  serving.join();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 200);
  EXPECT_TRUE(absl::StrContains(received, "event: job_submitted")) << received;
  EXPECT_TRUE(absl::StrContains(received, "\nid: ") || absl::StartsWith(received, "id: "))
      << received;
}

// --- The listen rule and the configuration.

TEST(ListenRuleTest, EveryCombination) {
  struct Case {
    const char* host;
    bool tokens, tls, allow_insecure, allowed;
  };
  const Case cases[] = {
      // Loopback: always (no token means every request is allowed, but only from this machine).
      {"127.0.0.1", false, false, false, true},
      {"127.0.0.1", false, true, false, true},
      {"::1", true, false, false, true},
      {"localhost", true, true, true, true},
      // Not loopback without tokens: never, whatever TLS or the override say.
      {"0.0.0.0", false, false, false, false},
      {"0.0.0.0", false, true, false, false},
      {"0.0.0.0", false, false, true, false},
      {"10.1.2.3", false, true, true, false},
      // Not loopback with tokens: TLS, or the explicit override.
      {"0.0.0.0", true, false, false, false},
      {"0.0.0.0", true, true, false, true},
      {"0.0.0.0", true, false, true, true},
      {"::", true, true, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.host, " tokens=", c.tokens, " tls=", c.tls,
                              " allow_insecure_http=", c.allow_insecure));
    const absl::Status s = northbound::CheckListenRule(c.host, c.tokens, c.tls, c.allow_insecure);
    EXPECT_EQ(s.ok(), c.allowed) << s;
    if (!c.allowed) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    }
  }
  // The message names the fixes.
  const std::string m(northbound::CheckListenRule("0.0.0.0", true, false, false).message());
  EXPECT_TRUE(absl::StrContains(m, "\"tls\"")) << m;
  EXPECT_TRUE(absl::StrContains(m, "--tls-cert")) << m;
  EXPECT_TRUE(absl::StrContains(m, "allow_insecure_http")) << m;
}

TEST(ListenRuleTest, HttpApiBindRefusesTokensInTheClearBeforeBinding) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  northbound::HttpApiOptions options;
  options.tokens = DefaultTokens();
  northbound::HttpApi api(server.controller().services(), options);
  // Refused by the rule: nothing is bound (a non-loopback address is never bound here).
  auto bound = api.Bind("0.0.0.0", 0);
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kFailedPrecondition) << bound.status();
  EXPECT_TRUE(absl::StrContains(bound.status().message(), "plain HTTP")) << bound.status();
  northbound::HttpApiOptions no_tokens;
  northbound::HttpApi open_api(server.controller().services(), no_tokens);
  no_tokens.allow_insecure_http = true;
  northbound::HttpApi open_api_override(server.controller().services(), no_tokens);
  EXPECT_EQ(open_api.Bind("0.0.0.0", 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(open_api_override.Bind("0.0.0.0", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace inac::server::testing
