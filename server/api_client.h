// A small client of INAC's own REST API (api/openapi.yaml), used by the client verbs of the CLI
// (`inac job submit|list|get|config|cancel`, `inac topo apply|show`). It speaks HTTP/1.1 over
// cpp-httplib to `inac serve` and turns the answer into one of three outcomes:
//   - a 2xx answer: OK with the decoded JSON body;
//   - a 4xx answer: the server refused the request; the status carries the server's error code,
//     message and field (the `{"error": {...}}` body) and maps to the CLI's exit code 2;
//   - anything else (connection refused, timeout, 5xx, a body that is not JSON): Unavailable or
//     Internal, exit code 1.
// Not thread-safe: one ApiClient per thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace inac::server {

struct ApiClientOptions {
  // Base URL of the controller, e.g. "http://127.0.0.1:8080" (the API lives under /api/v1).
  std::string server = "http://127.0.0.1:8080";
  std::string token;  // bearer token; empty sends no Authorization header
  int timeout_ms = 10000;
};

// One answer of the API. `http_status` is the HTTP status code (0 when no answer arrived).
struct ApiReply {
  int http_status = 0;
  nlohmann::json body;
};

class ApiClient {
 public:
  // InvalidArgument if `options.server` is not an http:// URL with a host.
  static absl::StatusOr<std::unique_ptr<ApiClient>> Create(const ApiClientOptions& options);
  ~ApiClient();

  // Sends `method` (GET, POST, PUT, PATCH, DELETE) to /api/v1`path` (path starts with '/'), with
  // `body` as JSON when it is not null and the extra `headers`. Returns the reply for 2xx; for a
  // 4xx a status whose code follows the HTTP status (400 InvalidArgument, 401 Unauthenticated,
  // 403 PermissionDenied, 404 NotFound, 409 FailedPrecondition or AlreadyExists by the error code,
  // 413 OutOfRange) and whose message is "HTTP <status> <code>: <message> [field <field>]";
  // Unavailable when the server cannot be reached; Internal for 5xx or a non-JSON body.
  absl::StatusOr<ApiReply> Call(
      const std::string& method, const std::string& path, const nlohmann::json& body = nullptr,
      const std::vector<std::pair<std::string, std::string>>& headers = {});

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Exit code for a failed Call: 2 (bad input) for a refusal by the server, 1 otherwise.
int ExitCodeFor(const absl::Status& status);

}  // namespace inac::server
