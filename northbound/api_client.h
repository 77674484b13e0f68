// The client of INAC's own REST API (api/openapi.yaml): the one HTTP client of the project. The
// client verbs of the CLI (`inac job submit|list|get|config|cancel`, `inac topo apply|show`), the
// host agents, the lab, the tests (tests/server/server_fixture.h, tests/system/harness.h) and the
// benchmarks all send their requests through it. It speaks HTTP/1.1 over cpp-httplib to
// `inac serve`, in the clear (http://) or over TLS (https://, the server's certificate verified:
// see ApiClientOptions::ca_cert_file), and offers three levels:
//   - Call: one API call under /api/v1 with a JSON body, turned into one of three outcomes (the
//     CLI's contract):
//       - a 2xx answer: OK with the decoded JSON body;
//       - a 4xx answer: the server refused the request; the status carries the server's error
//         code, message and field (the `{"error": {...}}` body) and maps to the CLI's exit code 2;
//       - anything else (connection refused, timeout, 5xx, a body that is not JSON): Unavailable
//         or Internal, exit code 1.
//   - SendRaw: any method and path (not only /api/v1), a body sent as it is, extra headers; the
//     reply whatever its HTTP status (status, headers, body, parsed JSON when it is JSON).
//   - Stream: like SendRaw, but the body is handed over piece by piece as it arrives (the
//     server-sent events of GET /api/v1/events/stream).
// Requests a client would never send (malformed request lines, truncated bodies, pipelining) are
// out of its scope: tests that need them write bytes to a socket themselves.
// A write to a connection the server closed fails the request (Unavailable); it never raises
// SIGPIPE in the caller's process.
// Not thread-safe: one ApiClient per thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace inac::northbound {

struct ApiClientOptions {
  // Base URL of the controller, e.g. "http://127.0.0.1:8080" or "https://ctl.example:8443" (the
  // API lives under /api/v1).
  std::string server = "http://127.0.0.1:8080";
  std::string token;  // bearer token; empty sends no Authorization header
  // Bounds connecting, each write and each read (for Stream: the idle time between two pieces).
  int timeout_ms = 10000;
  // Keeps the connection open across requests (HTTP keep-alive) instead of one connection per
  // request ("Connection: close"). A connection the server closed is reopened on the next request.
  bool keep_alive = false;
  // https:// only: the PEM file of the CA certificates (or the self-signed certificate) that
  // the server's certificate must chain to; empty: the system's trust store. The server's name
  // (or IP address) must be in its certificate either way: verification is never turned off.
  // Ignored for http:// servers.
  std::string ca_cert_file;
};

// One answer of the API. `http_status` is the HTTP status code (0 when no answer arrived).
struct ApiReply {
  int http_status = 0;
  nlohmann::json body;
};

// A request as SendRaw and Stream send it.
struct RawRequest {
  std::string method = "GET";  // sent as it is (any token, e.g. "DELETE" on a GET-only route)
  // Path and query as sent, e.g. "/metrics" or "/api/v1/jobs?limit=5" (no /api/v1 is added).
  // cpp-httplib percent-encodes the characters a request line cannot hold (space, non-ASCII);
  // '%' escapes are sent as they are.
  std::string target;
  // Sent as it is, with a Content-Type header (`content_type` unless `headers` names one), when it
  // is not empty or the method is POST, PUT or PATCH; otherwise no body and no Content-Type.
  std::string body;
  std::string content_type = "application/json";
  // Extra headers, sent in this order. An "Authorization" header here replaces the client's
  // token for this request.
  std::vector<std::pair<std::string, std::string>> headers;
};

// An HTTP answer as it arrived, whatever its status.
struct RawReply {
  int http_status = 0;
  // The response headers, names as the server wrote them (lookups are case-sensitive).
  std::multimap<std::string, std::string> headers;
  std::string body;
  // The parsed body: null when the body is empty, a discarded value (is_discarded()) when it is not
  // JSON.
  nlohmann::json json;

  // error.code, error.message and error.field of an API error body (`{"error": {...}}`); "" when
  // the body has no such member.
  std::string error_code() const;
  std::string error_message() const;
  std::string error_field() const;
};

class ApiClient {
 public:
  // InvalidArgument if `options.server` is not an http:// or https:// URL with a host, or (https)
  // `options.ca_cert_file` cannot be read or holds no PEM certificate.
  static absl::StatusOr<std::unique_ptr<ApiClient>> Create(const ApiClientOptions& options);
  ~ApiClient();

  // Sends `method` (GET, POST, PUT, PATCH, DELETE) to /api/v1`path` (path starts with '/'), with
  // `body` as JSON when it is not null and the extra `headers`. Returns the reply for 2xx; for a
  // 4xx a status whose code follows the HTTP status (400 InvalidArgument, 401 Unauthenticated,
  // 403 PermissionDenied, 404 NotFound, 409 FailedPrecondition or AlreadyExists by the error code,
  // 413 OutOfRange) and whose message is "HTTP <status> <code>: <message> [field <field>]";
  // Unavailable when the server cannot be reached; Internal for 5xx or a non-JSON body;
  // InvalidArgument for another method.
  absl::StatusOr<ApiReply> Call(
      const std::string& method, const std::string& path, const nlohmann::json& body = nullptr,
      const std::vector<std::pair<std::string, std::string>>& headers = {});

  // Sends `request` and returns the answer whatever its HTTP status (a 4xx or 5xx is a reply, not
  // an error). Unavailable ("cannot reach <server>: <reason>") when no answer arrived: connection
  // refused or reset, timeout; over https also a failed TLS handshake, and a server certificate
  // that does not verify ("cannot reach <server>: certificate verify failed: <OpenSSL's reason>").
  absl::StatusOr<RawReply> SendRaw(const RawRequest& request);

  // Sends `request` and hands the answer over as it arrives: `on_head` once with the status and
  // headers (`body` and `json` empty), then `on_data` with each piece of the body, until the
  // server ends it or a callback returns false (the client then hangs up). A null callback accepts
  // everything. Returns the HTTP status, also when a callback hung up; Unavailable when no answer
  // arrived. The timeout bounds each read, so a stream with keep-alives can last indefinitely.
  absl::StatusOr<int> Stream(const RawRequest& request,
                             const std::function<bool(const RawReply& head)>& on_head,
                             const std::function<bool(std::string_view data)>& on_data);

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Exit code for a failed Call: 2 (bad input) for a refusal by the server, 1 otherwise.
int ExitCodeFor(const absl::Status& status);

}  // namespace inac::northbound
