// The REST API under /api/v1 (api/openapi.yaml is its contract; a test checks that every route
// here is in the document and vice versa). A thin adapter over the controller's services
// (server/services.h): HttpApi serves HTTP through the event-driven HttpServer
// (http/http_server.h: connection caps, header and body limits and timeouts, pipelining),
// admits each request on its head (Host and Origin, route, token, role, media type) before its
// body is read, and times the handlers; the resources (northbound/rest_resources.h, one per
// collection) decode JSON strictly (core/json.h), call their service and encode the answer. The
// one place absl::Status becomes an HTTP status is StatusToHttp.
//
// Errors always have the body {"error": {"code", "message", "field"}}: malformed JSON or an
// unknown field 400, unauthenticated 401, forbidden 403, unknown id or route 404, a known path
// with another method 405 (with Allow), headers too slow 408, illegal state transition or
// idempotency conflict 409, an If-Match that no longer holds 412, body over 1 MiB 413, request line
// over 8 KiB 414, a body that is not application/json 415, headers over 16 KiB or 100 lines 431,
// storage unavailable or too many connections 503. `field` names the offending JSON path, query
// parameter or header when there is one.
//
// Auth: bearer tokens with roles. admin: everything; operator: jobs and plan previews, and reads;
// viewer: reads; worker: GET /jobs/{id}, GET /jobs/{id}/config, POST /jobs/{id}/progress and
// POST /jobs/{id}/data-path of the jobs of its tenant. /healthz and /readyz need no token. With
// no token configured every request is allowed, so Bind refuses any address that is not
// loopback, and requests whose Host is not a loopback name (DNS rebinding) or whose Origin is not
// a loopback page (a cross-site form) are refused with 403. With tokens, Bind refuses a
// non-loopback address without TLS
// (`server.tls_cert_file`/`tls_key_file`: HTTPS) unless `allow_insecure_http`: the rule of
// CheckListenRule below.
//
// Audit (docs/controller.md "Audit log and retention"): every write request (POST, PUT, PATCH,
// DELETE) that Admit let through is recorded after its handler ran, with its final status (2xx, 4xx
// and 5xx alike), through AuditService on the handler thread: the token's name and role
// ("anonymous"/"none" without tokens), remote address, method, path without the query string, and
// the job it named or created. Never a token or a body. The entry is a transaction of its own after
// the write's, so a failed append (logged at error, counted) never changes an answer already
// decided. Requests Admit refuses with 401 or 403 run no handler: they are counted
// (inac_http_auth_refusals_total{code}) and logged at warn, not written to the database (Admit
// runs on the event thread, which must not block). GET /audit (admin) reads the log.
//
// GET /events/stream holds a handler thread per open stream; at most threads/2 streams are open
// at once (503 `unavailable` with Retry-After beyond), so streams cannot starve the rest of the
// API; idle and slow connections hold no thread at all.
//
// The dashboard (northbound/web_assets.h): GET /, /ui and /ui/<file> answer the files of
// web/ compiled into the binary, without a token (they hold no data; Host and Origin are still
// checked without tokens), before routing; other methods on those paths are 405. GET /whoami
// names the caller's token and role (never the token) so the page shows only the actions its
// role may take.
//
// Thread safety: handlers run on the server's pool; the services are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "http/http_server.h"
#include "server/services.h"

namespace inac::northbound {

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
  int threads = 16;  // handler threads; at most threads/2 event streams are open at once
  // Connection and request limits (http/http_server.h); `workers` and `max_body_bytes` are
  // taken from the two fields above. `server.tls_cert_file` and `server.tls_key_file`: HTTPS.
  http::HttpServerOptions server;
  // Tokens over plain HTTP on a non-loopback address (CheckListenRule); off by default.
  bool allow_insecure_http = false;
  // Cluster mode (docs/ha.md): asked before the handler of every write (POST, PUT, PATCH,
  // DELETE). A value means this controller is a follower: the request is refused with 503, code
  // "unavailable", the leader's base URL in the error body's "leader" field and in the
  // X-Inac-Leader header ("" while no leader is known). Unset (single node): never refused.
  std::function<std::optional<std::string>()> not_leader;
};

// HTTP status for a canonical code (400, 401, 403, 404, 409, 413, 500, 503, 504).
int StatusToHttp(absl::StatusCode code);
// The error body's "code": the snake_case name of the canonical code.
std::string ErrorCodeName(absl::StatusCode code);

// The rule for the API's address `host`: with no API token every request is allowed, so only a
// loopback address (http::IsLoopbackHost) may be served, TLS or not; with tokens, a non-loopback
// address needs TLS (the tokens would cross the network in the clear) unless
// `allow_insecure_http`. FailedPrecondition naming the fix otherwise. `inac serve` checks its
// configuration with it before starting anything (cli/config.h, CheckListenAllowed).
absl::Status CheckListenRule(const std::string& host, bool has_tokens, bool tls,
                             bool allow_insecure_http);

// Constant-time string comparison (length differences still take the same time per byte of the
// longer string).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class HttpApi {
 public:
  // The services are not owned and must outlive the server.
  HttpApi(server::ApiServices services, HttpApiOptions options);
  ~HttpApi();

  // Binds `host:port` (port 0 picks one). Returns the bound port; FailedPrecondition, before
  // anything is bound, when CheckListenRule refuses `host` (no token and not loopback; tokens, not
  // loopback, no TLS and not allow_insecure_http); HttpServer::Bind's errors for unusable TLS
  // files; Unavailable when the address cannot be bound (e.g. another server listens there:
  // SO_REUSEPORT is not used).
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(); returns when stopped.
  void Serve();
  void Stop();
  http::HttpServerStats stats() const;

  // Every registered route as "METHOD /path" with OpenAPI-style parameters ("GET /jobs/{id}"),
  // relative to /api/v1.
  const std::vector<std::string>& routes() const { return routes_; }

 private:
  struct Route;
  void Routes();
  // The route for `req` (its path parameters into *matches when not null), or nullptr with the
  // 404 or 405 (and Allow) answer in `res`.
  const Route* Match(const httplib::Request& req, httplib::Response& res,
                     httplib::Match* matches) const;
  // On the request's head, before its body is read: Host and Origin without tokens (403), the
  // route (404, 405), the token (401) and its role (403), the body's media type (415).
  bool Admit(const httplib::Request& req, httplib::Response& res) const;
  // A complete request: a worker token's tenant, then the route's handler, timed, then the audit
  // entry of a write.
  void Handle(httplib::Request& req, httplib::Response& res);
  // Admit's refusals (401, 403) that `res` holds: counted and logged at warn (on the event
  // thread, so never written to the database). `reason` is a word for the log; `token_name`
  // names the token when one was recognised. Returns false (Admit's answer).
  bool Refused(const httplib::Request& req, const httplib::Response& res, absl::string_view reason,
               absl::string_view token_name) const;
  // On the handler thread, after the handler: appends the audit entry of a write request (POST,
  // PUT, PATCH, DELETE) with its final status, in a transaction of its own; a failure is logged
  // at error and counted (inac_audit_append_failures_total), the answer stands.
  void Audit(const httplib::Request& req, const httplib::Response& res, const Route& route);

  server::ApiServices services_;
  HttpApiOptions options_;
  std::vector<std::string> routes_;
  std::vector<Route> routes_table_;
  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace inac::northbound
