// What every REST resource of northbound/http_api.h shares: the route table it registers into, who
// may call a route, and the helpers that write answers. Every error answer goes through SendStatus
// (absl::Status -> HTTP via StatusToHttp, the `field` payload of core/status.h as the body's
// `field`), so the body is always {"error": {"code", "message", "field"}}.
//
// Thread safety: handlers run concurrently on the server's pool; the helpers are stateless.
#pragma once

#include <httplib.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/json.h"
#include "core/validation.h"

namespace inac::northbound::rest {

using core::Json;

// A handler given the request body (read with the size limit by the registration in http_api.cc).
using BodyHandler =
    std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;

// Who may call a route once authenticated (with tokens configured; without, everyone may).
enum class Access {
  kPublic,   // no token needed (health)
  kRead,     // viewer, operator, admin
  kOperate,  // operator, admin: jobs and plan previews
  kAdmin,    // admin: the topology and links
};

// One route: method, OpenAPI-form path relative to /api/v1 ("/jobs/{id}"), who may call it, and
// the handler. `tenant_workers`: a worker token may call it too, for a job ({id}) of its tenant.
struct RouteEntry {
  std::string method;
  std::string path;
  Access access = Access::kRead;
  bool tenant_workers = false;
  BodyHandler handler;
};

// The routes the resources declare; HttpApi registers exactly these.
class RouteTable {
 public:
  // A route that takes no body.
  void Add(const std::string& method, const std::string& path, Access access,
           httplib::Server::Handler handler, bool tenant_workers = false);
  // A route that takes a body (PUT, POST, PATCH).
  void AddBody(const std::string& method, const std::string& path, Access access,
               BodyHandler handler, bool tenant_workers = false);
  std::vector<RouteEntry>& entries() { return entries_; }

 private:
  std::vector<RouteEntry> entries_;
};

void SendJson(httplib::Response& res, int status, const Json& body);
// An error answer with an explicit HTTP status and code (for statuses no absl code maps to:
// 405, 413, 414, and 503 from health checks).
void SendError(httplib::Response& res, int http, const std::string& code, std::string message,
               std::string field = "");
// The error answer for `status` (StatusToHttp, ErrorCodeName, core::FieldOf).
void SendStatus(httplib::Response& res, const absl::Status& status);
// 400 invalid_argument naming `field` (a JSON path, query parameter or header).
void BadRequest(httplib::Response& res, const std::string& message, const std::string& field = "");
// 400 with every problem in the message and the first one's path as `field`.
void SendProblems(httplib::Response& res, const std::vector<core::Problem>& problems);
// Parses a request body as a JSON object; answers 400 and returns nullopt on failure.
std::optional<Json> ParseBody(const std::string& text, httplib::Response& res);
// Query parameter `name` as int64 into *out (left unchanged when absent); answers 400 and returns
// false on a bad value.
bool QueryInt(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out);

// A versioned resource's entity tag: the version as a strong ETag ("\"7\"").
std::string VersionEtag(int64_t version);
// An If-Match header (RFC 9110 section 13.1.1): `*`, or a comma-separated list of entity tags.
struct IfMatch {
  bool any = false;               // `*`: the resource must exist
  std::vector<int64_t> versions;  // the strong tags "N" it names (weak tags never match)
};
// The request's If-Match into *out (nullopt without the header). Answers 400 naming the header
// and returns false for a malformed one (an entity tag that is not quoted, or a strong tag that is
// not a version number).
bool ParseIfMatch(const httplib::Request& req, httplib::Response& res, std::optional<IfMatch>* out);
// The version a conditional write must find, given the current one (0 = the resource does not
// exist yet): `current` when the header matches it, else Aborted explaining the mismatch (the
// caller answers it 412 precondition_failed).
absl::StatusOr<int64_t> MatchVersion(const IfMatch& if_match, int64_t current);
// 412 precondition_failed with `status`'s message.
void PreconditionFailed(httplib::Response& res, const absl::Status& status);

}  // namespace inac::northbound::rest
