// libinac_client: the C ABI of agent/inac_client.h over agent::WorkerSession. The controller is
// asked over HTTP(S) with cpp-httplib directly: the library is loaded into training processes
// and links nothing of the controller (northbound/api_client.h is the CLI's client).
#include "agent/inac_client.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/config_feed.h"
#include "agent/gradient.h"
#include "agent/job_config.h"
#include "agent/packet.h"
#include "agent/udp_socket.h"
#include "agent/worker.h"
#include "core/topology.h"

#define INAC_API extern "C" __attribute__((visibility("default")))

namespace inac::agent {
namespace {

thread_local std::string g_last_error;

// The exponents a float32 all-reduce negotiates: lane i stands for exponent i - kExponentBias
// (max|x| < 2^e), one chunk of lanes.
constexpr int kExponentBias = 30;
constexpr int kMinExponent = -kExponentBias;
constexpr int kMaxExponent = kLanes - 1 - kExponentBias;  // 31
constexpr int kMaxScaleBits = 62;

inac_status StatusCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return INAC_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return INAC_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return INAC_NOT_FOUND;
    case absl::StatusCode::kUnavailable:
      return INAC_UNAVAILABLE;
    case absl::StatusCode::kDeadlineExceeded:
      return INAC_TIMEOUT;
    case absl::StatusCode::kFailedPrecondition:
      return INAC_FAILED_PRECONDITION;
    case absl::StatusCode::kResourceExhausted:
      return INAC_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kCancelled:
      return INAC_CANCELLED;
    default:
      return INAC_INTERNAL;
  }
}

inac_status Fail(const absl::Status& s) {
  g_last_error = std::string(s.message());
  return StatusCode(s);
}

inac_status Ok() {
  g_last_error.clear();
  return INAC_OK;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

int64_t ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// One HTTP exchange with the controller's API (/api/v1 + path).
class Controller {
 public:
  Controller(std::string server, std::string token)
      : server_(std::move(server)), token_(std::move(token)) {}

  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                      const nlohmann::json* body, int timeout_ms) const {
    if (server_.rfind("http://", 0) != 0 && server_.rfind("https://", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("server: not an http:// or https:// URL: ", server_));
    }
    httplib::Client client(server_);
    client.set_connection_timeout(std::chrono::milliseconds(timeout_ms));
    client.set_read_timeout(std::chrono::milliseconds(timeout_ms));
    client.set_write_timeout(std::chrono::milliseconds(timeout_ms));
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (const std::string ca = Env("INAC_CA_CERT"); !ca.empty()) client.set_ca_cert_path(ca);
#endif
    httplib::Headers headers;
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    const std::string target = "/api/v1" + path;
    httplib::Result r = method == "POST"
                            ? client.Post(target, headers, body != nullptr ? body->dump() : "{}",
                                          "application/json")
                            : client.Get(target, headers);
    const std::string what = absl::StrCat(method, " ", target, " at ", server_);
    if (!r) {
      return absl::UnavailableError(
          absl::StrCat(what, ": no answer (", httplib::to_string(r.error()), ")"));
    }
    nlohmann::json reply = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (r->status >= 200 && r->status < 300) {
      if (reply.is_discarded()) return absl::InternalError(what + ": the answer is not JSON");
      return reply;
    }
    std::string message = absl::StrCat("HTTP ", r->status);
    if (reply.is_object() && reply.contains("error") && reply["error"].is_object()) {
      message += ": " + reply["error"].value("message", std::string());
    }
    message = absl::StrCat(what, ": ", message);
    if (r->status == 404) return absl::NotFoundError(message);
    if (r->status == 409) return absl::FailedPreconditionError(message);
    if (r->status >= 500) return absl::UnavailableError(message);
    return absl::InvalidArgumentError(message);
  }

 private:
  std::string server_;
  std::string token_;
};

}  // namespace
}  // namespace inac::agent

struct inac_session {
  int64_t job = 0;
  std::string worker;
  std::unique_ptr<inac::agent::Controller> controller;  // null: no server to report to
  inac::agent::ConfigFeed feed;
  std::unique_ptr<inac::agent::ConfigPoller> poller;
  inac::agent::WorkerOptions options;
  absl::Mutex mu;
  std::unique_ptr<inac::agent::WorkerSession> session ABSL_GUARDED_BY(mu);
  std::vector<int32_t> lanes ABSL_GUARDED_BY(mu);  // inac_allreduce_f32's fixed point
  inac_stats stats ABSL_GUARDED_BY(mu){};
};

namespace inac::agent {
namespace {

// The all-reduce of `n` int32 lanes behind both entry points; fills `result` (not path-specific
// fields the caller sets).
absl::Status AllReduceLanes(inac_session* s, int32_t* buf, int64_t n, inac_result* result)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
  const WorkerReport& before = s->session->report();
  const int64_t packets = static_cast<int64_t>(s->session->socket().sent());
  const int64_t retransmissions = before.retransmissions;
  IterationStats it;
  const int64_t cpu = ThreadCpuUs();
  absl::Status status = s->session->AllReduce(buf, n, &it);
  const WorkerReport& after = s->session->report();
  const int64_t sent = static_cast<int64_t>(s->session->socket().sent()) - packets;
  s->stats.cpu_us += ThreadCpuUs() - cpu;
  s->stats.packets += sent;
  s->stats.retransmissions += after.retransmissions - retransmissions;
  s->stats.plans = static_cast<int64_t>(after.plans.size());
  s->stats.next_chunk = s->session->next_chunk();
  if (result != nullptr) {
    result->packets += sent;
    result->retransmissions += after.retransmissions - retransmissions;
    result->time_ms += it.time_ms;
    result->plan_version = s->session->plan_version();
    result->path = s->session->InNetwork() ? INAC_PATH_INA : INAC_PATH_PS;
  }
  return status;
}

}  // namespace
}  // namespace inac::agent

namespace inac::agent {
namespace {

// At most 256 bytes, cut at a UTF-8 character boundary, control characters as spaces (the
// controller refuses them: they would forge log lines).
std::string CleanReason(const char* reason) {
  std::string out(reason);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (out.size() > 256) {
    size_t cut = 256;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
  }
  return out;
}

}  // namespace
}  // namespace inac::agent

using inac::agent::Fail;
using inac::agent::Ok;

INAC_API void inac_options_init(inac_options* options) {
  if (options != nullptr) *options = inac_options{};
}

INAC_API inac_status inac_open(int64_t job, const char* worker, const inac_options* options,
                               inac_session** out) {
  namespace agent = inac::agent;
  if (out == nullptr) return Fail(absl::InvalidArgumentError("out: NULL"));
  *out = nullptr;
  if (job <= 0) return Fail(absl::InvalidArgumentError("job: must be a positive id"));
  if (worker == nullptr || *worker == '\0') {
    return Fail(absl::InvalidArgumentError("worker: required"));
  }
  inac_options o{};
  if (options != nullptr) o = *options;
  if (o.port < 0 || o.port > 65535) return Fail(absl::InvalidArgumentError("port: not a port"));
  if (o.timeout_ms < 0) return Fail(absl::InvalidArgumentError("timeout_ms: must be >= 0"));
  auto s = std::make_unique<inac_session>();
  s->job = job;
  s->worker = worker;
  const bool server_given =
      (o.server != nullptr && *o.server != '\0') || !agent::Env("INAC_SERVER").empty();
  std::string server =
      o.server != nullptr && *o.server != '\0' ? o.server : agent::Env("INAC_SERVER");
  if (server.empty()) server = "http://127.0.0.1:8080";
  const std::string token = o.token != nullptr ? o.token : agent::Env("INAC_TOKEN");
  agent::Controller controller(server, token);
  absl::StatusOr<agent::JobConfig> config;
  if (o.config_file != nullptr && *o.config_file != '\0') {
    std::ifstream in(o.config_file);
    if (!in) {
      return Fail(absl::NotFoundError(absl::StrCat(o.config_file, ": cannot be read")));
    }
    std::stringstream text;
    text << in.rdbuf();
    config = agent::ParseJobConfig(text.str());
    if (!config.ok()) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat(o.config_file, ": ", config.status().message())));
    }
    if (config->job_id != job) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(o.config_file, ": job_id ", config->job_id, " is not job ", job)));
    }
  } else {
    auto reply = controller.Call("GET", absl::StrCat("/jobs/", job, "/config"), nullptr, 10000);
    if (!reply.ok()) return Fail(reply.status());
    config = agent::JobConfigFromJson(*reply);
    if (!config.ok()) {
      return Fail(absl::InternalError(
          absl::StrCat("GET /jobs/", job, "/config: ", config.status().message())));
    }
  }
  agent::WorkerOptions& w = s->options;
  w.worker = worker;
  w.give_up_ms = o.timeout_ms > 0 ? o.timeout_ms : 30000;
  w.max_timeout_ms = std::min<int64_t>(1000, w.give_up_ms);
  w.timeout_ms = std::min<int64_t>(20, w.max_timeout_ms);
  w.updates = &s->feed;
  if (o.bind != nullptr && *o.bind != '\0') {
    auto bind = inac::core::ParseIpv4(o.bind);
    if (!bind.has_value()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("bind: not an IPv4 address: ", o.bind)));
    }
    w.socket.bind_address = *bind;
  }
  if (o.port != 0) w.socket.port = static_cast<uint16_t>(o.port);
  int netns = -1;
  if (o.netns != nullptr && *o.netns != '\0') {
    auto fd = agent::OpenNetns(o.netns);
    if (!fd.ok()) return Fail(fd.status());
    netns = *fd;
  }
  // The socket is made inside the namespace (a thread enters it); its calls work from any thread.
  absl::StatusOr<std::unique_ptr<agent::WorkerSession>> opened;
  absl::Status ran = agent::RunDataPlane(
      netns,
      [&] {
        opened = agent::OpenWorkerSession(*config, s->options);
        return opened.status();
      },
      nullptr);
  if (netns >= 0) ::close(netns);
  if (!ran.ok()) return Fail(ran);
  {
    absl::MutexLock lock(&s->mu);
    s->session = std::move(*opened);
  }
  if (server_given || o.config_file == nullptr || *o.config_file == '\0') {
    s->controller = std::make_unique<agent::Controller>(controller);
    const bool from_server = o.config_file == nullptr || *o.config_file == '\0';
    if (from_server && o.refresh_ms >= 0) {
      s->poller = std::make_unique<agent::ConfigPoller>(
          [controller, job]() -> absl::StatusOr<agent::JobConfig> {
            auto reply =
                controller.Call("GET", absl::StrCat("/jobs/", job, "/config"), nullptr, 2000);
            if (!reply.ok()) return reply.status();
            return agent::JobConfigFromJson(*reply);
          },
          config->plan_version, absl::Milliseconds(o.refresh_ms > 0 ? o.refresh_ms : 500),
          &s->feed);
    }
  }
  *out = s.release();
  return Ok();
}

INAC_API inac_status inac_allreduce_i32(inac_session* s, int32_t* buf, int64_t n,
                                        inac_result* result) {
  if (s == nullptr) return Fail(absl::InvalidArgumentError("session: NULL"));
  if (buf == nullptr || n < 1) {
    return Fail(absl::InvalidArgumentError("buffer: NULL or fewer than one value"));
  }
  if (result != nullptr) {
    *result = inac_result{};
    result->scale_bits = -1;
    result->lanes = n;
  }
  absl::MutexLock lock(&s->mu);
  absl::Status status = inac::agent::AllReduceLanes(s, buf, n, result);
  if (!status.ok()) {
    ++s->stats.failures;
    return Fail(status);
  }
  ++s->stats.allreduces;
  s->stats.lanes += n;
  return Ok();
}

INAC_API inac_status inac_allreduce_f32(inac_session* s, float* buf, int64_t n,
                                        inac_result* result) {
  namespace agent = inac::agent;
  if (s == nullptr) return Fail(absl::InvalidArgumentError("session: NULL"));
  if (buf == nullptr || n < 1) {
    return Fail(absl::InvalidArgumentError("buffer: NULL or fewer than one value"));
  }
  if (result != nullptr) {
    *result = inac_result{};
    result->lanes = n;
  }
  absl::MutexLock lock(&s->mu);
  // 1. The members agree on the largest exponent: one-hot lanes, summed.
  float largest = 0;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(buf[i]));  // NaN: skipped
  int exponent = agent::kMinExponent;
  if (std::isinf(largest)) {
    exponent = agent::kMaxExponent;
  } else if (largest > 0) {
    std::frexp(largest, &exponent);
    exponent = std::clamp(exponent, agent::kMinExponent, agent::kMaxExponent);
  }
  std::array<int32_t, agent::kLanes> votes{};
  votes[static_cast<size_t>(exponent + agent::kExponentBias)] = 1;
  absl::Status status = agent::AllReduceLanes(s, votes.data(), agent::kLanes, result);
  int scale_bits = -1;
  int64_t saturated = 0;
  if (status.ok()) {
    int top = 0;
    for (int i = 0; i < agent::kLanes; ++i) {
      if (votes[static_cast<size_t>(i)] != 0) top = i;
    }
    const int members = std::max(1, s->session->report().workers);
    const int log2_members = static_cast<int>(std::ceil(std::log2(static_cast<double>(members))));
    scale_bits =
        std::clamp(30 - (top - agent::kExponentBias) - log2_members, 0, agent::kMaxScaleBits);
    // 2. Fixed point, summed, and back.
    s->lanes.resize(static_cast<size_t>(n));
    saturated = agent::ToFixedPointLanes(std::span<const float>(buf, static_cast<size_t>(n)),
                                         scale_bits, s->lanes);
    status = agent::AllReduceLanes(s, s->lanes.data(), n, result);
    if (status.ok()) {
      agent::FromFixedPointLanes(s->lanes, scale_bits,
                                 std::span<float>(buf, static_cast<size_t>(n)));
    }
  } else {
    // Keep the numbering in step with members whose negotiation succeeded: they go on to an
    // all-reduce of n lanes, and so does this one's numbering (nothing is sent).
    s->session->Skip(n);
  }
  if (result != nullptr) {
    result->scale_bits = scale_bits;
    result->saturated = saturated;
  }
  s->stats.saturated += saturated;
  if (!status.ok()) {
    ++s->stats.failures;
    return Fail(status);
  }
  ++s->stats.allreduces;
  s->stats.lanes += n;
  return Ok();
}

INAC_API inac_status inac_get_stats(inac_session* s, inac_stats* stats) {
  if (s == nullptr || stats == nullptr) {
    return Fail(absl::InvalidArgumentError("session or stats: NULL"));
  }
  absl::MutexLock lock(&s->mu);
  *stats = s->stats;
  stats->next_chunk = s->session->next_chunk();
  stats->plans = static_cast<int64_t>(s->session->report().plans.size());
  return Ok();
}

INAC_API inac_status inac_report_data_path(inac_session* s, const char* path, const char* reason,
                                           int64_t allreduces, int64_t fallbacks) {
  namespace agent = inac::agent;
  if (s == nullptr || path == nullptr) {
    return Fail(absl::InvalidArgumentError("session or path: NULL"));
  }
  const std::string p = path;
  if (p != "ina" && p != "ps" && p != "fallback") {
    return Fail(absl::InvalidArgumentError("path: one of ina, ps, fallback"));
  }
  if (allreduces < 0 || fallbacks < 0) {
    return Fail(absl::InvalidArgumentError("allreduces, fallbacks: must be >= 0"));
  }
  if (s->controller == nullptr) {
    return Fail(absl::FailedPreconditionError(
        "the session was opened from a configuration file without a server: nothing to report "
        "to"));
  }
  nlohmann::json body = {
      {"worker", s->worker}, {"path", p}, {"allreduces", allreduces}, {"fallbacks", fallbacks}};
  if (reason != nullptr && *reason != '\0') body["reason"] = agent::CleanReason(reason);
  auto reply =
      s->controller->Call("POST", absl::StrCat("/jobs/", s->job, "/data-path"), &body, 5000);
  if (!reply.ok()) return Fail(reply.status());
  return Ok();
}

INAC_API void inac_close(inac_session* s) {
  if (s == nullptr) return;
  s->poller.reset();  // joins the poller before the feed goes
  delete s;
}

INAC_API const char* inac_last_error(void) { return inac::agent::g_last_error.c_str(); }

INAC_API const char* inac_version(void) { return "inac_client 1"; }
