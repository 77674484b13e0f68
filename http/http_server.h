// An event-driven HTTP/1.1 server for INAC's API: one epoll thread owns every connection (accept,
// read, parse, write, timeouts) and a fixed pool of handler threads runs complete requests. It
// replaces cpp-httplib's thread-per-connection server, which a few idle or slow clients could
// stall: here an open connection costs a buffer, never a thread, so idle keep-alive clients,
// slowloris clients and event streams cannot starve the API. Requests and responses are
// cpp-httplib's types (httplib::Request, httplib::Response), so the REST resources are unchanged.
// The HTTP/1.1 framing (request line, headers, Content-Length and chunked bodies, the
// request-smuggling defences) is http/http1_reader.h's; this server feeds it each connection's
// bytes and owns the rest: sockets, TLS, timeouts, pipelining, the handler pool.
//
// What it guarantees (docs/controller.md "Limits and guarantees"):
//   - connections: at most `max_connections` open, at most `max_connections_per_client` from one
//     remote address; beyond, the new connection gets 503 at once and is closed (never queued);
//   - the request line and headers: at most `max_header_bytes` and `max_headers` lines (431),
//     a request line of at most `max_request_line_bytes` (414), all of it within
//     `header_timeout_ms` of its first byte (408 and close: slowloris);
//   - the body: Content-Length or chunked, at most `max_body_bytes` (413 and close), within
//     `body_timeout_ms`; "Expect: 100-continue" is answered; other transfer codings are 501;
//   - keep-alive: an idle connection is closed after `idle_timeout_ms`; HTTP/1.1 pipelining is
//     served in order, at most `max_pipelined` requests queued per connection (the server stops
//     reading beyond, it never drops one);
//   - the listening socket is bound with SO_REUSEADDR only (not SO_REUSEPORT): a second server on
//     the same address fails to bind.
// Streaming responses (a chunked content provider, e.g. server-sent events) hold a handler thread
// for their life; the caller bounds how many may be open (northbound/rest_resources.h).
//
// HTTPS (`tls_cert_file` and `tls_key_file` set; policy in http/tls_context.h: TLS 1.2 minimum,
// server cipher order, no renegotiation, ALPN http/1.1): every connection is a TLS session driven
// by the same event loop. The handshake is non-blocking (SSL_accept's WANT_READ / WANT_WRITE set
// the connection's epoll interest) and must finish within `header_timeout_ms` of the accept, or
// the connection is closed (slowloris at the TLS layer; counted in `timed_out`); a failed
// handshake closes the connection (counted in `tls_handshake_failures`), except that a plain-HTTP
// request (GET, POST, HEAD, PUT) is answered, in plain HTTP, 400 "this port serves HTTPS" before
// closing. Over a connection cap a TLS connection is closed before the handshake (no 503: the
// answer would cost the handshake the cap exists to avoid). Reads, writes (streams included) and
// the lingering close go through the session; a connection that ends normally sends close_notify
// (best effort, never waited for). Everything else above holds unchanged over TLS.
//
// Errors the server answers itself have INAC's JSON error body {"error": {"code", "message",
// "field"}}.
//
// Thread safety: Bind, then Serve on one thread; Stop from any thread. The handler runs on the
// pool, concurrently.
#pragma once

#include <httplib.h>

// cpp-httplib's types change with this macro: every translation unit must see the same value.
// Debian's cpp-httplib.pc puts it in the Cflags of every target that links PkgConfig::HTTPLIB.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "httplib.h must be compiled with CPPHTTPLIB_OPENSSL_SUPPORT (link PkgConfig::HTTPLIB)"
#endif

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace inac::http {

struct HttpServerOptions {
  int workers = 16;  // handler threads
  size_t max_connections = 10000;
  size_t max_connections_per_client = 4096;
  size_t max_request_line_bytes = 8192;
  size_t max_header_bytes = 16384;  // request line and headers together
  size_t max_headers = 100;
  size_t max_body_bytes = 1 << 20;
  int header_timeout_ms = 10000;
  int body_timeout_ms = 30000;
  int idle_timeout_ms = 60000;
  int write_timeout_ms = 30000;  // a client that does not read its answer is closed
  size_t max_pipelined = 16;
  // HTTPS: a PEM certificate chain (server certificate first) and its unencrypted PEM private
  // key, read by Bind. Both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Called with a complete request (body read); sets the response. `req.remote_addr`,
// `req.remote_port`, `req.path` (percent-decoded, without the query), `req.target`, `req.params`,
// `req.headers` and `req.body` are filled. An exception thrown is answered 500.
using HttpHandler = std::function<void(httplib::Request& req, httplib::Response& res)>;
// Called on the event thread once a request's head is parsed, before its body is read: true to go
// on, false to answer `res` at once and close the connection (authentication, routing, media
// type). Must be quick: it holds up every connection.
using HttpHeadCheck = std::function<bool(const httplib::Request& req, httplib::Response& res)>;

struct HttpServerStats {
  int64_t open_connections = 0;
  int64_t accepted = 0;
  int64_t refused = 0;    // over a connection cap: 503
  int64_t timed_out = 0;  // header, body or write timeout
  int64_t requests = 0;
  int64_t tls_handshake_failures = 0;  // failed TLS handshakes (plain HTTP on the port included)
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeadCheck head_check = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `host:port` (an IPv4 or IPv6 literal or a name; port 0 picks one) and listens. Returns
  // the bound port; Unavailable with the reason when the address cannot be bound (in use, not
  // local). With TLS options the certificate and key are loaded first, and nothing is bound when
  // they are unusable: InvalidArgument naming the file and OpenSSL's reason (missing file, not
  // PEM, encrypted key), FailedPrecondition when the key is not the certificate's.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(); returns when stopped (at once if Stop() came first).
  void Serve();
  // Stops accepting, closes every connection and returns once Serve() has returned or was never
  // entered. Streams in progress end at their next write.
  void Stop();
  bool serving() const { return serving_; }
  // True when the options ask for HTTPS.
  bool tls() const;
  HttpServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> serving_{false};
};

}  // namespace inac::http
