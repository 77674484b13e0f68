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

namespace {

// A handler given the request body (read with the size limit, see the registration loop).
using BodyHandler =
    std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;

// Who may call a route once authenticated (with tokens configured; without, everyone may).
enum class Access {
  kPublic,   // no token needed (health)
  kRead,     // viewer, operator, admin
  kOperate,  // operator, admin: jobs and plan previews
  kAdmin,    // admin: the topology and links
};

// One route: method, OpenAPI-form path relative to /api/v1, who may call it, handler.
// `tenant_workers`: a worker token may call it too, for a job ({id}) of its tenant.
struct RouteEntry {
  std::string method;
  std::string path;
  Access access = Access::kRead;
  bool tenant_workers = false;
  BodyHandler handler;
};

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

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  // Invalid UTF-8 (from a path or query parameter echoed in a message) is replaced, not thrown.
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, int http, const std::string& code, std::string message,
               std::string field = "") {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  Json err = Json::object();
  err["code"] = code;
  err["message"] = message;
  err["field"] = field;
  Json body = Json::object();
  body["error"] = err;
  SendJson(res, http, body);
}

void SendStatus(httplib::Response& res, const absl::Status& status) {
  std::string message(status.message());
  SendError(res, StatusToHttp(status.code()), ErrorCodeName(status.code()), message,
            core::FieldOf(status));
}

// Parses a request body as a JSON object; sends 400 and returns nullopt on failure.
std::optional<Json> ParseBody(const std::string& text, httplib::Response& res) {
  if (text.empty()) {
    SendError(res, 400, "invalid_argument", "request body is empty; a JSON object is required");
    return std::nullopt;
  }
  std::vector<core::Problem> problems;
  auto json = core::ParseJsonText(text, &problems);
  if (!json) {
    SendError(res, 400, "invalid_argument", core::FormatProblems(problems));
    return std::nullopt;
  }
  if (!json->is_object()) {
    SendError(res, 400, "invalid_argument", "request body must be a JSON object");
    return std::nullopt;
  }
  return json;
}

void SendProblems(httplib::Response& res, const std::vector<core::Problem>& problems) {
  SendError(res, 400, "invalid_argument", core::FormatProblems(problems),
            problems.empty() ? "" : problems[0].path);
}

Json SwitchJson(const SwitchStatus& s) {
  Json j = Json::object();
  j["id"] = s.id;
  j["managed"] = s.managed;
  if (s.managed) {
    j["p4runtime"] = {{"address", s.address}, {"device_id", s.device_id}, {"target", s.target}};
  }
  j["connected"] = s.connected;
  j["primary"] = s.primary;
  j["election_id"] = s.election_id;
  j["pipeline_pushes"] = s.pipeline_pushes;
  j["intent_version"] = s.intent_version;
  j["applied_version"] = s.applied_version;
  j["in_sync"] = s.managed && s.applied_version == s.intent_version && s.last_error.empty();
  j["entries"] = s.entries;
  j["last_error"] = s.last_error;
  j["last_contact_ms"] = s.last_contact_ms;
  j["aggregators"] = {{"used", s.aggregators_used}, {"total", s.aggregators_total}};
  return j;
}

Json EventJson(const core::Event& e) {
  Json j = Json::object();
  j["seq"] = e.seq;
  j["time_ms"] = e.time_ms;
  j["kind"] = e.kind;
  if (e.job_id) j["job_id"] = *e.job_id;
  j["message"] = e.message;
  std::vector<core::Problem> ignored;
  auto data = core::ParseJsonText(e.data_json, &ignored);
  j["data"] = data ? *data : Json::object();
  return j;
}

Json ConfigJson(const JobConfig& c) {
  Json j = Json::object();
  j["job_id"] = c.job.id;
  j["state"] = std::string(core::JobStateName(c.job.state));
  j["plan_version"] = c.plan_version;
  j["generation"] = c.generation;
  j["algorithm"] = c.algorithm;
  j["batch_size"] = c.batch_size;
  j["gradient_bytes"] = c.job.spec.gradient_bytes;
  j["priority"] = c.priority;
  j["rate_gbps"] = c.rate_gbps;
  j["iteration_ms"] = c.iteration_ms;
  Json shards = Json::array();
  for (const auto& s : c.shards) {
    shards.push_back({{"ps", s.ps},
                      {"ps_address", core::FormatIpv4(s.ps_address)},
                      {"share", s.share},
                      {"tag", s.tag},
                      {"multicast_group", s.multicast_group}});
  }
  j["parameter_servers"] = shards;
  Json routes = Json::array();
  for (const auto& r : c.routes) {
    routes.push_back({{"worker", r.worker},
                      {"ps", r.ps},
                      {"aggregation_node", r.aggregation_node},
                      {"fraction", r.fraction}});
  }
  j["workers"] = routes;
  Json regions = Json::array();
  for (const auto& r : c.regions) {
    regions.push_back({{"switch", r.switch_id},
                       {"tag", r.tag},
                       {"aggregator_base", r.aggregator_base},
                       {"aggregator_count", r.aggregator_count},
                       {"slot_offset", r.slot_offset},
                       {"window", r.window}});
  }
  j["aggregator_regions"] = regions;
  Json tags = Json::array();
  for (const auto& t : c.tags) {
    Json members = Json::array();
    for (const auto& m : t.members) {
      members.push_back({{"worker", m.worker},
                         {"address", core::FormatIpv4(m.address)},
                         {"aggregation_node", m.aggregation_node}});
    }
    Json aggregators = Json::array();
    for (const auto& a : t.aggregators) {
      aggregators.push_back({{"switch", a.switch_id},
                             {"address", core::FormatIpv4(a.address)},
                             {"inputs", a.inputs},
                             {"aggregator_base", a.aggregator_base},
                             {"aggregator_count", a.aggregator_count},
                             {"slot_offset", a.slot_offset},
                             {"window", a.window}});
    }
    tags.push_back({{"tag", t.tag},
                    {"ps", t.ps},
                    {"ps_address", core::FormatIpv4(t.ps_address)},
                    {"share", t.share},
                    {"range", {t.begin, t.end}},
                    {"multicast_group", t.multicast_group},
                    {"members", members},
                    {"aggregators", aggregators}});
  }
  j["tags"] = tags;
  if (!c.ring.empty()) j["ring"] = c.ring;
  return j;
}

// GET /jobs/{id}'s `ina_counters`: the samples per (switch, tag) and their totals.
Json InaCountersJson(const std::vector<InaCounterSample>& samples) {
  Json list = Json::array();
  int64_t aggregated = 0, fallback = 0, preempted = 0;
  for (const InaCounterSample& c : samples) {
    list.push_back({{"switch", c.switch_id},
                    {"tag", c.tag},
                    {"aggregated_packets", c.aggregated_packets},
                    {"fallback_packets", c.fallback_packets},
                    {"preempted_packets", c.preempted_packets},
                    {"read_ms", c.read_ms}});
    aggregated += c.aggregated_packets;
    fallback += c.fallback_packets;
    preempted += c.preempted_packets;
  }
  Json j = Json::object();
  j["switches"] = list;
  j["aggregated_packets"] = aggregated;
  j["fallback_packets"] = fallback;
  j["preempted_packets"] = preempted;
  return j;
}

std::string PromEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string RenderMetrics(const ControllerMetrics& m) {
  std::ostringstream o;
  o << "# HELP inac_jobs Jobs by state.\n# TYPE inac_jobs gauge\n";
  for (auto s : {core::JobState::kPending, core::JobState::kScheduled, core::JobState::kRunning,
                 core::JobState::kCompleted, core::JobState::kCancelled, core::JobState::kFailed}) {
    auto it = m.jobs_by_state.find(s);
    o << "inac_jobs{state=\"" << core::JobStateName(s) << "\"} "
      << (it == m.jobs_by_state.end() ? 0 : it->second) << "\n";
  }
  // Latencies as Prometheus summaries without quantiles (_sum and _count), in seconds per the
  // exposition conventions.
  o << "# HELP inac_plan_duration_seconds Time the scheduler took per plan computed since start.\n"
    << "# TYPE inac_plan_duration_seconds summary\n"
    << "inac_plan_duration_seconds_sum " << m.plan_ms_sum / 1000.0 << "\n"
    << "inac_plan_duration_seconds_count " << m.plans_computed << "\n";
  o << "# HELP inac_priority_refreshes_total Plan versions that only re-ranked ESA priorities "
       "from progress and age.\n"
    << "# TYPE inac_priority_refreshes_total counter\ninac_priority_refreshes_total "
    << m.priority_refreshes << "\n";
  o << "# HELP inac_plan_last_duration_seconds Duration of the last planning run.\n"
    << "# TYPE inac_plan_last_duration_seconds gauge\n"
    << "inac_plan_last_duration_seconds " << m.last_plan_ms / 1000.0 << "\n";
  o << "# HELP inac_southbound_reconcile_duration_seconds Time per switch reconciliation (read, "
       "diff, P4Runtime writes).\n"
    << "# TYPE inac_southbound_reconcile_duration_seconds summary\n"
    << "inac_southbound_reconcile_duration_seconds_sum " << m.reconcile_ms_sum / 1000.0 << "\n"
    << "inac_southbound_reconcile_duration_seconds_count " << m.reconcile_runs << "\n";
  o << "# HELP inac_southbound_writes_total P4Runtime updates the switches accepted.\n"
    << "# TYPE inac_southbound_writes_total counter\ninac_southbound_writes_total "
    << m.southbound_writes << "\n";
  o << "# HELP inac_southbound_errors_total Refused updates and switch errors.\n"
    << "# TYPE inac_southbound_errors_total counter\ninac_southbound_errors_total "
    << m.southbound_errors << "\n";
  o << "# HELP inac_loop_passes_total Controller loop passes.\n"
    << "# TYPE inac_loop_passes_total counter\ninac_loop_passes_total " << m.loop_passes << "\n";
  o << "# HELP inac_switch_connected 1 when the P4Runtime session is up.\n"
    << "# TYPE inac_switch_connected gauge\n";
  for (const auto& s : m.switches) {
    if (s.managed)
      o << "inac_switch_connected{switch=\"" << PromEscape(s.id) << "\"} " << s.connected << "\n";
  }
  o << "# HELP inac_switch_primary 1 when this controller is the switch's primary.\n"
    << "# TYPE inac_switch_primary gauge\n";
  for (const auto& s : m.switches) {
    if (s.managed)
      o << "inac_switch_primary{switch=\"" << PromEscape(s.id) << "\"} " << s.primary << "\n";
  }
  o << "# HELP inac_switch_in_sync 1 when the switch holds its latest intent.\n"
    << "# TYPE inac_switch_in_sync gauge\n";
  for (const auto& s : m.switches) {
    if (s.managed) {
      o << "inac_switch_in_sync{switch=\"" << PromEscape(s.id) << "\"} "
        << (s.applied_version == s.intent_version && s.last_error.empty()) << "\n";
    }
  }
  o << "# HELP inac_switch_aggregator_utilisation Share of the switch's aggregators allocated.\n"
    << "# TYPE inac_switch_aggregator_utilisation gauge\n";
  for (const auto& s : m.switches) {
    if (s.aggregators_total > 0) {
      o << "inac_switch_aggregator_utilisation{switch=\"" << PromEscape(s.id) << "\"} "
        << static_cast<double>(s.aggregators_used) / s.aggregators_total << "\n";
    }
  }
  // Per job and switch (the tags of a job's shards on one switch summed), as last read.
  o << "# HELP inac_ina_packets_total INA packets per job and switch as last read from the "
       "switch's counters: aggregated, fallback (sent on unaggregated) or preempted. Reset when "
       "the switch restarts or its pipeline is pushed.\n"
    << "# TYPE inac_ina_packets_total counter\n";
  std::map<std::pair<core::JobId, std::string>, std::array<int64_t, 3>> per_job_switch;
  for (const InaCounterSample& c : m.ina_counters) {
    auto& v = per_job_switch[{c.job_id, c.switch_id}];
    v[0] += c.aggregated_packets;
    v[1] += c.fallback_packets;
    v[2] += c.preempted_packets;
  }
  static constexpr const char* kKinds[] = {"aggregated", "fallback", "preempted"};
  for (const auto& [key, v] : per_job_switch) {
    for (int k = 0; k < 3; ++k) {
      o << "inac_ina_packets_total{job=\"" << key.first << "\",switch=\"" << PromEscape(key.second)
        << "\",kind=\"" << kKinds[k] << "\"} " << v[k] << "\n";
    }
  }
  return o.str();
}

// Query parameter as int64; sends 400 on a bad value.
bool QueryInt(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out) {
  if (!req.has_param(name)) return true;
  std::string v = req.get_param_value(name);
  if (!absl::SimpleAtoi(v, out)) {
    SendError(res, 400, "invalid_argument",
              absl::StrCat("query parameter ", name, ": not an integer: \"", v, "\""), name);
    return false;
  }
  return true;
}

}  // namespace

HttpApi::HttpApi(Controller* controller, HttpApiOptions options)
    : controller_(controller), options_(std::move(options)), server_(new httplib::Server) {
  Routes();
}

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
  std::vector<RouteEntry> table;
  auto Add = [&table](const std::string& method, const std::string& path, Access access,
                      httplib::Server::Handler handler, bool tenant_workers = false) {
    table.push_back(RouteEntry{method, path, access, tenant_workers,
                               [handler](const httplib::Request& req, const std::string&,
                                         httplib::Response& res) { handler(req, res); }});
  };
  auto AddBody = [&table](const std::string& method, const std::string& path, Access access,
                          BodyHandler handler, bool tenant_workers = false) {
    table.push_back(RouteEntry{method, path, access, tenant_workers, std::move(handler)});
  };
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
  Controller* c = controller_;
  s.set_pre_routing_handler([tokens, c](const httplib::Request& req, httplib::Response& res) {
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

  // ---- Health
  Add("GET", "/healthz", Access::kPublic, [c](const httplib::Request&, httplib::Response& res) {
    bool alive = c->LoopAlive();
    SendJson(res, alive ? 200 : 503, {{"status", alive ? "ok" : "loop not running"}});
  });
  Add("GET", "/readyz", Access::kPublic, [c](const httplib::Request&, httplib::Response& res) {
    absl::Status ready = c->Ready();
    if (ready.ok()) return SendJson(res, 200, {{"status", "ready"}});
    SendError(res, 503, "unavailable", std::string(ready.message()));
  });
  Add("GET", "/metrics", Access::kRead, [c](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(c->Metrics()), "text/plain; version=0.0.4");
  });

  // ---- Topology, switches, links
  Add("GET", "/topology", Access::kRead, [c](const httplib::Request&, httplib::Response& res) {
    auto t = c->GetTopology();
    if (!t.ok()) return SendStatus(res, t.status());
    if (!t->has_value()) return SendError(res, 404, "not_found", "no topology has been loaded");
    res.set_header("X-Topology-Version", std::to_string((*t)->version));
    SendJson(res, 200, core::TopologyToJson((*t)->topology));
  });
  AddBody("PUT", "/topology", Access::kAdmin,
          [c](const httplib::Request&, const std::string& text, httplib::Response& res) {
            auto body = ParseBody(text, res);
            if (!body) return;
            std::vector<core::Problem> problems;
            core::Topology topology = core::TopologyFromJson(*body, &problems);
            if (problems.empty()) problems = core::ValidateTopology(topology);
            if (!problems.empty()) return SendProblems(res, problems);
            auto version = c->PutTopology(topology);
            if (!version.ok()) return SendStatus(res, version.status());
            SendJson(res, 200, {{"version", *version}});
          });
  Add("GET", "/switches", Access::kRead, [c](const httplib::Request&, httplib::Response& res) {
    Json arr = Json::array();
    for (const auto& sw : c->Switches()) arr.push_back(SwitchJson(sw));
    SendJson(res, 200, {{"switches", arr}});
  });
  Add("GET", "/switches/{id}", Access::kRead,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto sw = c->GetSwitch(req.matches[1]);
        if (!sw.ok()) return SendStatus(res, sw.status());
        SendJson(res, 200, SwitchJson(*sw));
      });
  Add("GET", "/links", Access::kRead, [c](const httplib::Request&, httplib::Response& res) {
    auto t = c->GetTopology();
    if (!t.ok()) return SendStatus(res, t.status());
    Json links = Json::array();
    if (t->has_value()) links = core::TopologyToJson((*t)->topology)["links"];
    SendJson(res, 200, {{"links", links}});
  });
  AddBody("PATCH", "/links/{id}", Access::kAdmin,
          [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
            auto body = ParseBody(text, res);
            if (!body) return;
            std::string status_name;
            for (auto it = body->begin(); it != body->end(); ++it) {
              if (it.key() != "status") {
                return SendError(res, 400, "invalid_argument",
                                 absl::StrCat(it.key(), ": unknown field"), it.key());
              }
            }
            if (!body->contains("status") || !(*body)["status"].is_string()) {
              return SendError(res, 400, "invalid_argument", "status: required, \"up\" or \"down\"",
                               "status");
            }
            auto status = core::ParseLinkStatus((*body)["status"].get<std::string>());
            if (!status) {
              return SendError(res, 400, "invalid_argument", "status: must be \"up\" or \"down\"",
                               "status");
            }
            auto link = c->SetLinkStatus(req.matches[1], *status);
            if (!link.ok()) return SendStatus(res, link.status());
            core::Topology one;
            one.links.push_back(*link);
            SendJson(res, 200, core::TopologyToJson(one)["links"][0]);
          });

  // ---- Jobs
  AddBody("POST", "/jobs", Access::kOperate,
          [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
            auto body = ParseBody(text, res);
            if (!body) return;
            std::vector<core::Problem> problems;
            core::JobSpec spec = core::JobSpecFromJson(*body, "", &problems);
            if (!problems.empty()) return SendProblems(res, problems);
            std::optional<core::IdempotencyKey> key;
            if (req.has_header("Idempotency-Key")) {
              std::string k = req.get_header_value("Idempotency-Key");
              if (k.empty() || k.size() > 255) {
                return SendError(res, 400, "invalid_argument",
                                 "Idempotency-Key must be 1 to 255 characters", "Idempotency-Key");
              }
              key = core::IdempotencyKey{k, core::JobSpecToJson(spec).dump()};
            }
            auto result = c->SubmitJob(spec, key);
            if (!result.ok()) return SendStatus(res, result.status());
            res.set_header("Location", absl::StrCat("/api/v1/jobs/", result->job.id));
            SendJson(res, result->created ? 201 : 200, core::JobToJson(result->job));
          });
  Add("GET", "/jobs", Access::kRead, [c](const httplib::Request& req, httplib::Response& res) {
    core::JobFilter filter;
    if (req.has_param("state")) {
      std::vector<std::string> names = absl::StrSplit(req.get_param_value("state"), ',');
      for (const std::string& name : names) {
        auto st = core::ParseJobState(name);
        if (!st) {
          return SendError(res, 400, "invalid_argument",
                           absl::StrCat("state: unknown job state \"", name, "\""), "state");
        }
        filter.states.push_back(*st);
      }
    }
    if (req.has_param("tenant")) filter.tenant = req.get_param_value("tenant");
    int64_t after = 0, limit = 100;
    if (!QueryInt(req, res, "after", &after) || !QueryInt(req, res, "limit", &limit)) return;
    if (limit < 1 || limit > 1000) {
      return SendError(res, 400, "invalid_argument", "limit: must be between 1 and 1000", "limit");
    }
    if (after < 0) {
      return SendError(res, 400, "invalid_argument", "after: a cursor is a job id >= 0", "after");
    }
    filter.after_id = after;
    filter.limit = limit;
    auto page = c->ListJobs(filter);
    if (!page.ok()) return SendStatus(res, page.status());
    Json jobs = Json::array();
    for (const auto& job : page->jobs) jobs.push_back(core::JobToJson(job));
    Json body = Json::object();
    body["jobs"] = jobs;
    body["next_after"] = page->next_after_id ? Json(*page->next_after_id) : Json(nullptr);
    SendJson(res, 200, body);
  });
  Add(
      "GET", "/jobs/{id}", Access::kRead,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto job = c->GetJob(std::stoll(req.matches[1]));
        if (!job.ok()) return SendStatus(res, job.status());
        Json body = core::JobToJson(*job);
        body["ina_counters"] = InaCountersJson(c->JobCounters(job->id));
        SendJson(res, 200, body);
      },
      /*tenant_workers=*/true);
  Add("DELETE", "/jobs/{id}", Access::kOperate,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto job = c->CancelJob(std::stoll(req.matches[1]));
        if (!job.ok()) return SendStatus(res, job.status());
        SendJson(res, 200, core::JobToJson(*job));
      });
  Add(
      "GET", "/jobs/{id}/config", Access::kRead,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto config = c->GetJobConfig(std::stoll(req.matches[1]));
        if (!config.ok()) return SendStatus(res, config.status());
        SendJson(res, 200, ConfigJson(*config));
      },
      /*tenant_workers=*/true);
  AddBody(
      "POST", "/jobs/{id}/progress", Access::kOperate,
      [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
        auto body = ParseBody(text, res);
        if (!body) return;
        int64_t iterations = -1;
        std::optional<double> loss;
        for (auto it = body->begin(); it != body->end(); ++it) {
          if (it.key() == "iterations_done") {
            if (!it->is_number_integer() || it->get<int64_t>() < 0) {
              return SendError(res, 400, "invalid_argument",
                               "iterations_done: must be a non-negative integer",
                               "iterations_done");
            }
            iterations = it->get<int64_t>();
          } else if (it.key() == "loss") {
            if (!it->is_number() || !std::isfinite(it->get<double>())) {
              return SendError(res, 400, "invalid_argument", "loss: must be a finite number",
                               "loss");
            }
            loss = it->get<double>();
          } else {
            return SendError(res, 400, "invalid_argument",
                             absl::StrCat(it.key(), ": unknown field"), it.key());
          }
        }
        if (iterations < 0) {
          return SendError(res, 400, "invalid_argument", "iterations_done: required",
                           "iterations_done");
        }
        auto job = c->ReportProgress(std::stoll(req.matches[1]), iterations, loss);
        if (!job.ok()) return SendStatus(res, job.status());
        SendJson(res, 200, core::JobToJson(*job));
      },
      /*tenant_workers=*/true);

  // ---- Plan
  Add("GET", "/plan", Access::kRead, [c](const httplib::Request&, httplib::Response& res) {
    auto plan = c->CurrentPlan();
    if (!plan.ok()) return SendStatus(res, plan.status());
    if (!plan->has_value())
      return SendError(res, 404, "not_found", "no plan has been computed yet");
    Json body = core::PlanToJson((*plan)->plan);
    body["created_ms"] = (*plan)->created_ms;
    SendJson(res, 200, body);
  });
  AddBody("POST", "/plan/preview", Access::kOperate,
          [c](const httplib::Request&, const std::string& text, httplib::Response& res) {
            auto body = ParseBody(text, res);
            if (!body) return;
            std::vector<core::Problem> problems;
            core::JobSpec spec = core::JobSpecFromJson(*body, "", &problems);
            if (!problems.empty()) return SendProblems(res, problems);
            auto plan = c->PreviewPlan(spec);
            if (!plan.ok()) return SendStatus(res, plan.status());
            SendJson(res, 200, core::PlanToJson(*plan));
          });

  // ---- Events
  Add("GET", "/events", Access::kRead, [c](const httplib::Request& req, httplib::Response& res) {
    core::EventFilter filter;
    int64_t since = 0, limit = 100, job = 0;
    if (!QueryInt(req, res, "since", &since) || !QueryInt(req, res, "limit", &limit) ||
        !QueryInt(req, res, "job", &job)) {
      return;
    }
    if (limit < 1 || limit > 1000) {
      return SendError(res, 400, "invalid_argument", "limit: must be between 1 and 1000", "limit");
    }
    if (since < 0) {
      return SendError(res, 400, "invalid_argument", "since: must be a sequence number >= 0",
                       "since");
    }
    filter.after_seq = since;
    filter.limit = limit;
    if (req.has_param("job")) filter.job_id = job;
    if (req.has_param("kind")) filter.kind = req.get_param_value("kind");
    auto events = c->Events(filter);
    if (!events.ok()) return SendStatus(res, events.status());
    Json arr = Json::array();
    int64_t last = since;
    for (const auto& e : *events) {
      arr.push_back(EventJson(e));
      last = e.seq;
    }
    SendJson(res, 200, {{"events", arr}, {"last_seq", last}});
  });
  // Every open stream holds one thread of the pool: at most half the pool streams, so that
  // streams cannot starve the rest of the API (the others get 503 and may retry).
  auto streams = std::make_shared<std::atomic<int>>(0);
  int max_streams = std::max(1, options_.threads / 2);
  Add("GET", "/events/stream", Access::kRead,
      [c, streams, max_streams](const httplib::Request& req, httplib::Response& res) {
        int64_t since = 0;
        if (!QueryInt(req, res, "since", &since)) return;
        if (streams->fetch_add(1) >= max_streams) {
          streams->fetch_sub(1);
          res.set_header("Retry-After", "5");
          return SendError(res, 503, "unavailable",
                           absl::StrCat("too many open event streams (at most ", max_streams,
                                        "); poll GET /events?since= or retry later"));
        }
        if (req.has_header("Last-Event-ID")) {
          int64_t v = 0;
          if (absl::SimpleAtoi(req.get_header_value("Last-Event-ID"), &v)) since = v;
        }
        auto cursor = std::make_shared<int64_t>(since);
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [c, cursor](size_t, httplib::DataSink& sink) {
              if (!sink.is_writable()) return false;
              c->WaitForEvents(*cursor, 1000);
              core::EventFilter filter;
              filter.after_seq = *cursor;
              filter.limit = 500;
              auto events = c->Events(filter);
              if (!events.ok()) return false;
              std::string out;
              for (const auto& e : *events) {
                absl::StrAppend(&out, "id: ", e.seq, "\nevent: ", e.kind,
                                "\ndata: ", EventJson(e).dump(), "\n\n");
                *cursor = e.seq;
              }
              if (out.empty()) out = ": keep-alive\n\n";
              if (!sink.write(out.data(), out.size())) return false;
              if (!c->LoopAlive()) {
                sink.done();
                return false;
              }
              return true;
            },
            // Runs when the response is destroyed: the stream ended.
            [streams](bool) { streams->fetch_sub(1); });
      });

  // ---- Registration: exactly the table above.
  size_t max_body = options_.max_body_bytes;
  auto patterns = std::make_shared<std::vector<std::pair<std::string, std::regex>>>();
  for (RouteEntry& route : table) {
    std::string pattern = "/api/v1" + route.path;
    auto brace = pattern.find("{id}");
    if (brace != std::string::npos) {
      // Job ids are integers below 10^18 (so they always fit an int64_t); other ids are one path
      // segment.
      bool job = route.path.rfind("/jobs/{id}", 0) == 0;
      pattern.replace(brace, 4, job ? R"((\d{1,18}))" : R"(([^/]+))");
    }
    const std::string& m = route.method;
    BodyHandler h = std::move(route.handler);
    // Authorization, before the body is read: the token's role against the route's access.
    auto allowed = [tokens = options_.tokens, c = controller_, access = route.access,
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
              auto job = c->GetJob(id);
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
            return SendError(res, 400, "invalid_argument", "the request body could not be read");
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
