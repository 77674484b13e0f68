#include "northbound/http_api.h"

#include <httplib.h>

#include <chrono>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"
#include "http/address.h"
#include "northbound/rest_resources.h"
#include "northbound/rest_router.h"
#include "northbound/web_assets.h"
#include "spdlog/spdlog.h"

namespace inac::northbound {

using core::Json;

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "operator") return Role::kOperator;
  if (name == "viewer") return Role::kViewer;
  if (name == "worker") return Role::kWorker;
  return std::nullopt;
}

int StatusToHttp(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 503;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

std::string ErrorCodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    case absl::StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kAlreadyExists:
      return "already_exists";
    case absl::StatusCode::kPermissionDenied:
      return "permission_denied";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case absl::StatusCode::kAborted:
      return "aborted";
    case absl::StatusCode::kOutOfRange:
      return "out_of_range";
    case absl::StatusCode::kUnimplemented:
      return "unimplemented";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kDataLoss:
      return "data_loss";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    default:
      return "internal";
  }
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

using rest::Access;
using rest::BodyHandler;
using rest::SendError;

namespace {

// The token a request presents (Authorization: Bearer, scheme case-insensitive per RFC 7235
// section 2.1), or nullptr.
const ApiToken* Presenter(const std::vector<ApiToken>& tokens, const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.size() <= prefix.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(header).substr(0, prefix.size()), prefix)) {
    return nullptr;
  }
  std::string_view presented = std::string_view(header).substr(prefix.size());
  const ApiToken* who = nullptr;
  for (const ApiToken& t : tokens) {
    if (ConstantTimeEquals(presented, t.token) && !who) who = &t;
  }
  return who;
}

// The host part of a Host header or an Origin's authority: "[::1]:8080" -> "::1",
// "localhost:80" -> "localhost".
std::string HostOf(absl::string_view authority) {
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    return std::string(authority.substr(1, close == absl::string_view::npos ? close : close - 1));
  }
  return std::string(authority.substr(0, authority.find(':')));
}

bool IsWriteMethod(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

std::string RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kOperator:
      return "operator";
    case Role::kViewer:
      return "viewer";
    case Role::kWorker:
      return "worker";
  }
  return "none";
}

// The job a write names (/jobs/{id}...) or created (POST /jobs answered 200 or 201: its
// Location), for the audit log.
std::optional<core::JobId> AuditedJob(const httplib::Request& req, const httplib::Response& res,
                                      absl::string_view route_path) {
  int64_t id = 0;
  if (absl::StartsWith(route_path, "/jobs/{id}")) {
    if (req.matches.size() > 1 && absl::SimpleAtoi(req.matches[1].str(), &id)) return id;
    return std::nullopt;
  }
  if (route_path == "/jobs" && (res.status == 200 || res.status == 201)) {
    const std::string header = res.get_header_value("Location");  // a copy: keep it alive
    absl::string_view location = header;
    if (absl::ConsumePrefix(&location, "/api/v1/jobs/") && absl::SimpleAtoi(location, &id)) {
      return id;
    }
  }
  return std::nullopt;
}

bool IsJsonContentType(const std::string& value) {
  // "application/json", optionally with parameters ("; charset=utf-8").
  absl::string_view type = absl::string_view(value).substr(0, value.find(';'));
  return absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(type), "application/json");
}

}  // namespace

// One registered route: the table's entry and its compiled path.
struct HttpApi::Route {
  rest::RouteEntry entry;
  std::regex pattern;
};

HttpApi::HttpApi(server::ApiServices services, HttpApiOptions options)
    : services_(services), options_(std::move(options)) {
  Routes();
  http::HttpServerOptions server = options_.server;
  server.workers = options_.threads;
  server.max_body_bytes = options_.max_body_bytes;
  server_ = std::make_unique<http::HttpServer>(
      server, [this](httplib::Request& req, httplib::Response& res) { Handle(req, res); },
      [this](const httplib::Request& req, httplib::Response& res) { return Admit(req, res); });
}

absl::Status CheckListenRule(const std::string& host, bool has_tokens, bool tls,
                             bool allow_insecure_http) {
  if (http::IsLoopbackHost(host)) return absl::OkStatus();
  if (!has_tokens) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to listen on ", host,
                     " without API tokens (every request would be allowed); configure tokens or "
                     "listen on a loopback address"));
  }
  if (!tls && !allow_insecure_http) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", host,
        " over plain HTTP with API tokens (they would cross the network in the clear); serve "
        "HTTPS with \"tls\": {\"cert\": FILE, \"key\": FILE} in the config (or --tls-cert, "
        "--tls-key), listen on a loopback address, or accept the risk with "
        "\"allow_insecure_http\": true (--allow-insecure-http)"));
  }
  return absl::OkStatus();
}

HttpApi::~HttpApi() { Stop(); }

absl::StatusOr<int> HttpApi::Bind(const std::string& host, int port) {
  if (auto s = CheckListenRule(host, !options_.tokens.empty(), server_->tls(),
                               options_.allow_insecure_http);
      !s.ok()) {
    return s;
  }
  return server_->Bind(host, port);
}

void HttpApi::Serve() { server_->Serve(); }

void HttpApi::Stop() {
  if (server_) server_->Stop();
}

http::HttpServerStats HttpApi::stats() const { return server_->stats(); }

void HttpApi::Routes() {
  rest::RouteTable table;
  // ---- The resources, one per collection (northbound/rest_resources.h).
  rest::HealthResource(services_.health).Register(table);
  rest::TopologyResource(services_.topology).Register(table);
  rest::SwitchesResource(services_.topology).Register(table);
  rest::JobsResource(services_.jobs).Register(table);
  rest::PlanResource(services_.plans).Register(table);
  rest::EventsResource(services_.events, services_.health, std::max(1, options_.threads / 2))
      .Register(table);
  if (services_.audit != nullptr) rest::AuditResource(services_.audit).Register(table);
  if (services_.stats != nullptr) rest::StatsResource(services_.stats).Register(table);
  // Who the caller is (the dashboard shows write actions only to roles that may use them).
  table.Add("GET", "/whoami", Access::kRead,
            [this](const httplib::Request& req, httplib::Response& res) {
              if (options_.tokens.empty()) {
                return rest::SendJson(res, 200,
                                      {{"name", "anonymous"}, {"role", "admin"}, {"auth", false}});
              }
              const ApiToken* who = Presenter(options_.tokens, req);
              rest::SendJson(res, 200,
                             {{"name", who != nullptr ? who->name : ""},
                              {"role", who != nullptr ? RoleName(who->role) : "none"},
                              {"auth", true}});
            });
  for (rest::RouteEntry& entry : table.entries()) {
    std::string pattern = "/api/v1" + entry.path;
    auto brace = pattern.find("{id}");
    if (brace != std::string::npos) {
      // Job ids are integers below 10^18 (so they always fit an int64_t); other ids (switches,
      // links) are one path segment of the id character set (core::IdProblem, docs/formats.md
      // "Limits"): anything else, a decoded control character above all, matches no route (404).
      bool job = entry.path.rfind("/jobs/{id}", 0) == 0;
      pattern.replace(brace, 4, job ? R"((\d{1,18}))" : R"(([A-Za-z0-9][A-Za-z0-9._~:@+\-]*))");
    }
    if (entry.method != "GET" && entry.method != "DELETE" && entry.method != "PUT" &&
        entry.method != "POST" && entry.method != "PATCH") {
      spdlog::critical("event=bad_route method={} path={}", entry.method, entry.path);
      std::abort();  // a programming error in a resource's table
    }
    routes_.push_back(entry.method + " " + entry.path);
    routes_table_.push_back(Route{std::move(entry), std::regex(pattern)});
  }
}

const HttpApi::Route* HttpApi::Match(const httplib::Request& req, httplib::Response& res,
                                     httplib::Match* matches) const {
  std::string allow;
  for (const Route& r : routes_table_) {
    httplib::Match m;
    if (!std::regex_match(req.path, m, r.pattern)) continue;
    if (r.entry.method == req.method) {
      if (matches != nullptr) *matches = m;
      return &r;
    }
    absl::StrAppend(&allow, allow.empty() ? "" : ", ", r.entry.method);
  }
  if (!allow.empty()) {
    res.set_header("Allow", allow);
    SendError(res, 405, "method_not_allowed",
              absl::StrCat("no route ", req.method, " ", req.path, " (allowed: ", allow, ")"));
  } else {
    SendError(res, 404, "not_found", absl::StrCat("no route ", req.method, " ", req.path));
  }
  return nullptr;
}

bool HttpApi::Admit(const httplib::Request& req, httplib::Response& res) const {
  const bool open = options_.tokens.empty();
  // Without tokens every request is allowed, so only a page the user opened on this machine may
  // send one: a Host that is not loopback is a DNS-rebinding attempt, and a cross-site Origin a
  // page of another site (browsers send Origin on every cross-site POST, PUT, PATCH, DELETE).
  if (open) {
    const std::string host = HostOf(req.get_header_value("Host"));
    if (req.has_header("Host") && !http::IsLoopbackHost(host)) {
      SendError(res, 403, "permission_denied",
                absl::StrCat("Host \"", req.get_header_value("Host"),
                             "\" is not a loopback name; without API tokens only loopback "
                             "clients are served"),
                "Host");
      return Refused(req, res, "host_not_loopback", "");
    }
    if (req.has_header("Origin")) {
      const std::string origin = req.get_header_value("Origin");
      const size_t scheme = origin.find("://");
      const bool loopback =
          scheme != std::string::npos &&
          http::IsLoopbackHost(HostOf(absl::string_view(origin).substr(scheme + 3)));
      if (!loopback) {
        SendError(res, 403, "permission_denied",
                  absl::StrCat("Origin \"", origin,
                               "\" is not a loopback page; without API tokens cross-site requests "
                               "are refused"),
                  "Origin");
        return Refused(req, res, "origin_not_loopback", "");
      }
    }
  }
  // The dashboard's files hold no data: served without a token (northbound/web_assets.h).
  if (IsDashboardPath(req.path)) {
    if (req.method == "GET") return true;
    res.set_header("Allow", "GET");
    SendError(res, 405, "method_not_allowed",
              absl::StrCat("no route ", req.method, " ", req.path, " (allowed: GET)"));
    return false;
  }
  const Route* route = Match(req, res, nullptr);
  if (route == nullptr) return false;
  const Access access = route->entry.access;
  if (!open && access != Access::kPublic) {
    const ApiToken* who = Presenter(options_.tokens, req);
    if (who == nullptr) {
      const bool presented = !req.get_header_value("Authorization").empty();
      res.set_header("WWW-Authenticate", presented ? "Bearer error=\"invalid_token\"" : "Bearer");
      SendError(
          res, 401, "unauthenticated",
          presented ? "unknown bearer token" : "missing bearer token (Authorization: Bearer ...)");
      return Refused(req, res, presented ? "unknown_token" : "missing_token", "");
    }
    bool ok = false;
    switch (who->role) {
      case Role::kAdmin:
        ok = true;
        break;
      case Role::kOperator:
        ok = access == Access::kRead || access == Access::kOperate;
        break;
      case Role::kViewer:
        ok = access == Access::kRead;
        break;
      case Role::kWorker:
        ok = route->entry.tenant_workers;  // the job's tenant is checked by Handle
        break;
    }
    if (!ok) {
      SendError(res, 403, "permission_denied",
                absl::StrCat("token \"", who->name, "\" may not ", req.method, " ", req.path));
      return Refused(req, res, "role", who->name);
    }
  }
  // Bodies are JSON: a form or text/plain body (what a page may send cross-site without a
  // preflight) is refused before it is read.
  const bool has_body =
      req.has_header("Transfer-Encoding") ||
      (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
  if (has_body && !IsJsonContentType(req.get_header_value("Content-Type"))) {
    SendError(res, 415, "unsupported_media_type",
              absl::StrCat("Content-Type must be application/json, not \"",
                           req.get_header_value("Content-Type"), "\""),
              "Content-Type");
    return false;
  }
  return true;
}

void HttpApi::Handle(httplib::Request& req, httplib::Response& res) {
  if (IsDashboardPath(req.path)) return ServeWebAsset(req, res);
  const Route* route = Match(req, res, &req.matches);
  if (route == nullptr) return;  // Admit answered; cannot happen for an admitted request
  // A worker token: only the jobs of its tenant (unknown ids answer 404 through the route).
  if (!options_.tokens.empty() && route->entry.access != Access::kPublic) {
    const ApiToken* who = Presenter(options_.tokens, req);
    if (who != nullptr && who->role == Role::kWorker) {
      int64_t id = 0;
      bool ok = false;
      if (req.matches.size() > 1 && absl::SimpleAtoi(req.matches[1].str(), &id)) {
        auto job = services_.jobs->GetJob(id);
        ok = !job.ok() || job->spec.tenant == who->tenant;
      }
      if (!ok) {
        SendError(res, 403, "permission_denied",
                  absl::StrCat("token \"", who->name, "\" may not ", req.method, " ", req.path));
        Audit(req, res, *route);
        return;
      }
    }
  }
  // A follower of a cluster refuses writes and names the leader (docs/ha.md).
  if (options_.not_leader && IsWriteMethod(req.method)) {
    if (std::optional<std::string> leader = options_.not_leader()) {
      Json err = {{"code", "unavailable"},
                  {"message", leader->empty()
                                  ? std::string("this controller is a follower and no leader is "
                                                "elected yet; retry")
                                  : absl::StrCat("this controller is a follower; send writes to "
                                                 "the leader at ",
                                                 *leader)},
                  {"field", ""},
                  {"leader", *leader}};
      res.set_header("X-Inac-Leader", *leader);
      res.set_header("Retry-After", "1");
      rest::SendJson(res, 503, Json{{"error", err}});
      Audit(req, res, *route);
      return;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  route->entry.handler(req, req.body, res);
  if (server::Metrics* metrics = services_.health->metrics(); metrics != nullptr) {
    metrics->ObserveHttp(
        route->entry.method, route->entry.path, res.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  Audit(req, res, *route);
}

bool HttpApi::Refused(const httplib::Request& req, const httplib::Response& res,
                      absl::string_view reason, absl::string_view token_name) const {
  // On the event thread: a counter and a log line, never the database.
  if (server::Metrics* metrics = services_.health->metrics(); metrics != nullptr) {
    metrics->CountAuthRefusal(res.status);
  }
  // Every request-derived value escaped (core::EscapeForLog): the path is percent-decoded, so
  // without it a request could end this line and forge the next.
  spdlog::warn("event=request_refused status={} reason={} token=\"{}\" remote={} method={} path={}",
               res.status, std::string(reason), core::EscapeForLog(std::string(token_name)),
               core::EscapeForLog(req.remote_addr), core::EscapeForLog(req.method),
               core::EscapeForLog(req.path));
  return false;
}

void HttpApi::Audit(const httplib::Request& req, const httplib::Response& res, const Route& route) {
  if (services_.audit == nullptr || !IsWriteMethod(req.method)) return;
  core::AuditEntry entry;
  if (options_.tokens.empty()) {
    entry.actor = "anonymous";
    entry.role = "none";
  } else if (const ApiToken* who = Presenter(options_.tokens, req); who != nullptr) {
    entry.actor = who->name;
    entry.role = RoleName(who->role);
  } else {
    entry.actor = "unknown";  // no write route is public, so Admit let no such request through
    entry.role = "none";
  }
  entry.remote_addr = req.remote_addr.empty() ? "-" : req.remote_addr;
  entry.method = req.method;
  entry.path = req.path.empty() ? "/" : req.path;  // decoded, without the query string
  entry.status = res.status >= 100 && res.status <= 599 ? res.status : 500;
  entry.job_id = AuditedJob(req, res, route.entry.path);
  if (absl::Status s = services_.audit->RecordAudit(entry); !s.ok()) {
    if (server::Metrics* metrics = services_.health->metrics(); metrics != nullptr) {
      metrics->CountAuditFailure();
    }
    spdlog::error("event=audit_append_failed actor=\"{}\" method={} path={} status={} error=\"{}\"",
                  core::EscapeForLog(entry.actor), core::EscapeForLog(entry.method),
                  core::EscapeForLog(entry.path), entry.status, core::EscapeForLog(s.ToString()));
  }
}

}  // namespace inac::northbound
