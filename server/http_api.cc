#include "server/http_api.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/json.h"
#include "core/status.h"
#include "server/config.h"
#include "server/controller.h"
#include "server/rest_resources.h"
#include "server/rest_router.h"
#include "spdlog/spdlog.h"

namespace inac::server {

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

// The token a request presents, or nullptr (the pre-routing handler has answered 401 for a
// missing or unknown one, except on public routes).
const ApiToken* Presenter(const std::vector<ApiToken>& tokens, const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.size() <= prefix.size()) return nullptr;
  std::string_view presented = std::string_view(header).substr(prefix.size());
  const ApiToken* who = nullptr;
  for (const ApiToken& t : tokens) {
    if (ConstantTimeEquals(presented, t.token) && !who) who = &t;
  }
  return who;
}

}  // namespace

HttpApi::HttpApi(ApiServices services, HttpApiOptions options)
    : services_(services), options_(std::move(options)), server_(new httplib::Server) {
  Routes();
}

HttpApi::HttpApi(Controller* controller, HttpApiOptions options)
    : HttpApi(controller->services(), std::move(options)) {}

HttpApi::~HttpApi() { Stop(); }

absl::StatusOr<int> HttpApi::Bind(const std::string& host, int port) {
  if (options_.tokens.empty() && !IsLoopbackHost(host)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to listen on ", host,
                     " without API tokens (every request would be allowed); configure tokens or "
                     "listen on a loopback address"));
  }
  if (port == 0) {
    int bound = server_->bind_to_any_port(host.c_str());
    if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot bind ", host));
    return bound;
  }
  if (!server_->bind_to_port(host.c_str(), port)) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind ", host, ":", port, " (address in use or not local)"));
  }
  return port;
}

void HttpApi::Serve() {
  serving_ = true;
  if (!stop_requested_) server_->listen_after_bind();
  serving_ = false;
}

void HttpApi::Stop() {
  if (!server_) return;
  stop_requested_ = true;
  // Either Serve() sees stop_requested_ and never listens, or it is serving: wait until its
  // accept loop runs (or it returned), so that stop() closes the listening socket.
  while (serving_ && !server_->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->stop();
}

void HttpApi::Routes() {
  httplib::Server& s = *server_;
  // The route table: every route is first recorded here in OpenAPI form ("/jobs/{id}"); the
  // loop at the end of this function registers exactly these, and routes() reports them (the
  // OpenAPI contract test compares that list with api/openapi.yaml).
  rest::RouteTable table;
  s.set_payload_max_length(options_.max_body_bytes);
  // Responses leave in two writes (headers, body): without TCP_NODELAY, Nagle holds the body until
  // the client's delayed ACK, ~40 ms per request on a keep-alive connection. cpp-httplib closes a
  // keep-alive connection after 5 requests by default; with several clients their reconnections
  // overflow its listen backlog (5) and a dropped SYN costs a 1 s retransmission.
  s.set_tcp_nodelay(true);
  s.set_keep_alive_max_count(1000);
  int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("event=http_exception error=\"{}\"", what);
        SendError(res, 500, "internal", "internal error");
      });
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("event=http method={} path={} status={}", req.method, req.path, res.status);
  });

  // ---- Authentication: a pre-routing handler checks the token (401); each route then checks
  // that the token's role may call it (403, RouteEntry::access).
  auto tokens = options_.tokens;
  s.set_pre_routing_handler([tokens](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/api/v1/healthz" || req.path == "/api/v1/readyz") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (tokens.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    // The scheme is case-insensitive (RFC 7235 section 2.1).
    if (header.size() <= prefix.size() ||
        !absl::EqualsIgnoreCase(absl::string_view(header).substr(0, prefix.size()), prefix)) {
      res.set_header("WWW-Authenticate", "Bearer");
      SendError(res, 401, "unauthenticated", "missing bearer token (Authorization: Bearer ...)");
      return httplib::Server::HandlerResponse::Handled;
    }
    std::string_view presented = std::string_view(header).substr(prefix.size());
    const ApiToken* who = nullptr;
    for (const ApiToken& t : tokens) {
      if (ConstantTimeEquals(presented, t.token) && !who) who = &t;
    }
    if (!who) {
      res.set_header("WWW-Authenticate", "Bearer error=\"invalid_token\"");
      SendError(res, 401, "unauthenticated", "unknown bearer token");
      return httplib::Server::HandlerResponse::Handled;
    }
    // Authorization is the route's (RouteEntry::access, checked before its body is read).
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // ---- The resources, one per collection (server/rest_resources.h).
  rest::HealthResource(services_.health).Register(table);
  rest::TopologyResource(services_.topology).Register(table);
  rest::SwitchesResource(services_.topology).Register(table);
  rest::JobsResource(services_.jobs).Register(table);
  rest::PlanResource(services_.plans).Register(table);
  rest::EventsResource(services_.events, services_.health, std::max(1, options_.threads / 2))
      .Register(table);

  // ---- Registration: exactly the table above.
  size_t max_body = options_.max_body_bytes;
  auto patterns = std::make_shared<std::vector<std::pair<std::string, std::regex>>>();
  for (rest::RouteEntry& route : table.entries()) {
    std::string pattern = "/api/v1" + route.path;
    auto brace = pattern.find("{id}");
    if (brace != std::string::npos) {
      // Job ids are integers below 10^18 (so they always fit an int64_t); other ids are one path
      // segment.
      bool job = route.path.rfind("/jobs/{id}", 0) == 0;
      pattern.replace(brace, 4, job ? R"((\d{1,18}))" : R"(([^/]+))");
    }
    const std::string& m = route.method;
    // The route's handler, timed into the request-latency histogram (by method, route, status).
    BodyHandler h = [inner = std::move(route.handler), metrics = services_.health->metrics(),
                     method = route.method,
                     path = route.path](const httplib::Request& req, const std::string& body,
                                        httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      inner(req, body, res);
      if (metrics != nullptr) {
        metrics->ObserveHttp(
            method, path, res.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    };
    // Authorization, before the body is read: the token's role against the route's access.
    auto allowed = [tokens = options_.tokens, jobs = services_.jobs, access = route.access,
                    workers = route.tenant_workers](const httplib::Request& req,
                                                    httplib::Response& res) {
      if (tokens.empty() || access == Access::kPublic) return true;
      const ApiToken* who = Presenter(tokens, req);
      if (who == nullptr) return false;  // answered 401 before routing
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
          if (workers && req.matches.size() > 1) {
            int64_t id = 0;
            // Unknown ids answer 404 through the route itself.
            if (absl::SimpleAtoi(req.matches[1].str(), &id)) {
              auto job = jobs->GetJob(id);
              ok = !job.ok() || job->spec.tenant == who->tenant;
            }
          }
          break;
      }
      if (!ok) {
        SendError(res, 403, "permission_denied",
                  absl::StrCat("token \"", who->name, "\" may not ", req.method, " ", req.path));
      }
      return ok;
    };
    // Without a body (no Content-Length or 0, and not chunked) httplib calls the plain handler.
    httplib::Server::Handler plain = [h, allowed](const httplib::Request& req,
                                                  httplib::Response& res) {
      if (allowed(req, res)) h(req, req.body, res);
    };
    // With one, the body is streamed to this reader so that the size limit holds for chunked
    // bodies too (httplib enforces it for Content-Length only). An oversized body is drained,
    // not kept, so the connection stays in step, and answered 413.
    httplib::Server::HandlerWithContentReader streamed =
        [h, max_body, allowed](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& reader) {
          if (!allowed(req, res)) {
            res.set_header("Connection", "close");  // the body is not read
            return;
          }
          std::string body;
          bool too_large = false;
          bool read = reader([&](const char* data, size_t n) {
            if (too_large || body.size() + n > max_body) {
              too_large = true;
              body.clear();
              return true;
            }
            body.append(data, n);
            return true;
          });
          if (too_large || res.status == 413) {
            res.set_header("Connection", "close");
            return SendError(res, 413, "payload_too_large",
                             absl::StrCat("request body is larger than ", max_body, " bytes"));
          }
          if (!read) {
            res.set_header("Connection", "close");
            return rest::BadRequest(res, "the request body could not be read");
          }
          h(req, body, res);
        };
    if (m == "GET") {
      s.Get(pattern, std::move(plain));
    } else if (m == "DELETE") {
      s.Delete(pattern, std::move(plain));
    } else if (m == "PUT") {
      s.Put(pattern, std::move(plain));
      s.Put(pattern, std::move(streamed));
    } else if (m == "POST") {
      s.Post(pattern, std::move(plain));
      s.Post(pattern, std::move(streamed));
    } else if (m == "PATCH") {
      s.Patch(pattern, std::move(plain));
      s.Patch(pattern, std::move(streamed));
    } else {
      spdlog::critical("event=bad_route method={} path={}", m, route.path);
      std::abort();  // a programming error in the table above
    }
    routes_.push_back(m + " " + route.path);
    patterns->emplace_back(m, std::regex(pattern));
  }

  // ---- Errors httplib produces itself (no route, bad request line, body too large, ...).
  s.set_error_handler([patterns, max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      // A path that exists with other methods: 405 with Allow.
      std::string allow;
      for (const auto& [method, re] : *patterns) {
        if (std::regex_match(req.path, re))
          absl::StrAppend(&allow, allow.empty() ? "" : ", ", method);
      }
      if (!allow.empty()) {
        res.set_header("Allow", allow);
        return SendError(
            res, 405, "method_not_allowed",
            absl::StrCat("no route ", req.method, " ", req.path, " (allowed: ", allow, ")"));
      }
      return SendError(res, 404, "not_found", absl::StrCat("no route ", req.method, " ", req.path));
    }
    switch (res.status) {
      case 413:
        return SendError(res, 413, "payload_too_large",
                         absl::StrCat("request body is larger than ", max_body, " bytes"));
      case 414:
        return SendError(res, 414, "uri_too_long", "request URI is too long");
      case 400:
        return SendError(res, 400, "invalid_argument", "malformed HTTP request");
      default:
        SendError(res, res.status, res.status >= 500 ? "internal" : "invalid_argument",
                  absl::StrCat("HTTP ", res.status));
    }
  });
}

}  // namespace inac::server
