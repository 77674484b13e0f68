// The REST API under /api/v1 (api/openapi.yaml is its contract; a test checks that every route
// here is in the document and vice versa). A thin adapter over the controller's services
// (server/services.h): HttpApi owns the HTTP server, authenticates, authorises each route by the
// access its resource declares, bounds bodies and times requests; the resources
// (server/rest_resources.h, one per collection) decode JSON strictly (core/json.h), call their
// service and encode the answer. The one place absl::Status becomes an HTTP status is
// StatusToHttp.
//
// Errors always have the body {"error": {"code", "message", "field"}}: malformed JSON or an
// unknown field 400, unauthenticated 401, forbidden 403, unknown id or route 404, a known path
// with another method 405 (with Allow), illegal state transition or idempotency conflict 409,
// body over 1 MiB 413, request URI over 8 KiB 414, storage unavailable 503. `field` names the
// offending JSON path, query parameter or header when there is one.
//
// Auth: bearer tokens with roles. admin: everything; operator: jobs and plan previews, and reads;
// viewer: reads; worker: GET /jobs/{id}, GET /jobs/{id}/config and POST /jobs/{id}/progress of
// the jobs of its tenant. /healthz and /readyz need no token. With no token configured every
// request is allowed, and Bind refuses any address that is not loopback.
//
// GET /events/stream holds a pool thread per open stream; at most threads/2 streams are open at
// once (503 `unavailable` with Retry-After beyond), so streams cannot starve the rest of the API.
//
// Thread safety: the server answers on a pool of threads; the services are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/services.h"

namespace httplib {
class Server;
}

namespace inac::server {

class Controller;

enum class Role { kAdmin, kOperator, kViewer, kWorker };
// "admin", "operator", "viewer", "worker"; nullopt otherwise.
std::optional<Role> ParseRole(std::string_view name);

struct ApiToken {
  std::string name;  // for logs; never the token itself
  std::string token;
  Role role = Role::kViewer;
  std::string tenant;  // worker tokens: the tenant whose jobs they may touch
};

struct HttpApiOptions {
  std::vector<ApiToken> tokens;
  size_t max_body_bytes = 1 << 20;
  int threads = 16;
};

// HTTP status for a canonical code (400, 401, 403, 404, 409, 413, 500, 503, 504).
int StatusToHttp(absl::StatusCode code);
// The error body's "code": the snake_case name of the canonical code.
std::string ErrorCodeName(absl::StatusCode code);

// Constant-time string comparison (length differences still take the same time per byte of the
// longer string).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class HttpApi {
 public:
  // The services are not owned and must outlive the server.
  HttpApi(ApiServices services, HttpApiOptions options);
  // Every service of `controller` (not owned; must outlive the server).
  HttpApi(Controller* controller, HttpApiOptions options);
  ~HttpApi();

  // Binds `host:port` (port 0 picks one). Returns the bound port; FailedPrecondition when no
  // token is configured and `host` is not a loopback address (IsLoopbackHost); Unavailable when
  // the address cannot be bound.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(); returns when stopped.
  void Serve();
  void Stop();

  // Every registered route as "METHOD /path" with OpenAPI-style parameters ("GET /jobs/{id}"),
  // relative to /api/v1.
  const std::vector<std::string>& routes() const { return routes_; }

 private:
  void Routes();
  ApiServices services_;
  HttpApiOptions options_;
  std::unique_ptr<httplib::Server> server_;
  // Stop() may run before Serve() has entered cpp-httplib's accept loop; httplib's own stop()
  // is a no-op then and the later listen would block forever. These make the two meet.
  std::atomic<bool> serving_{false};
  std::atomic<bool> stop_requested_{false};
  std::vector<std::string> routes_;
};

}  // namespace inac::server
