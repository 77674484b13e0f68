#include "cli/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/plan.h"
#include "http/address.h"

namespace inac::cli {

using core::Json;

namespace {
// Ten years: longer is a typo (0 already means forever).
constexpr int64_t kMaxRetentionDays = 3650;
}  // namespace

namespace {

// The "http" object: the API server's limits (http/http_server.h), each in a range that keeps
// the server working (a timeout of 0 or a cap of 0 connections would refuse everything).
void ParseHttpLimits(const Json& v, const std::string& k, http::HttpServerOptions* o,
                     std::vector<core::Problem>* problems) {
  if (!v.is_object()) return problems->push_back({k, "expected an object"});
  struct Field {
    const char* name;
    int64_t lo, hi;
    std::function<void(int64_t)> set;
  };
  const std::vector<Field> fields = {
      {"threads", 2, 256, [o](int64_t x) { o->workers = static_cast<int>(x); }},
      {"max_connections", 16, 1000000, [o](int64_t x) { o->max_connections = x; }},
      {"max_connections_per_client", 1, 1000000,
       [o](int64_t x) { o->max_connections_per_client = x; }},
      {"max_request_line_bytes", 1024, 1 << 20, [o](int64_t x) { o->max_request_line_bytes = x; }},
      {"max_header_bytes", 1024, 1 << 20, [o](int64_t x) { o->max_header_bytes = x; }},
      {"max_headers", 8, 10000, [o](int64_t x) { o->max_headers = x; }},
      {"max_body_bytes", 1024, 64 << 20, [o](int64_t x) { o->max_body_bytes = x; }},
      {"header_timeout_ms", 100, 600000,
       [o](int64_t x) { o->header_timeout_ms = static_cast<int>(x); }},
      {"body_timeout_ms", 100, 600000,
       [o](int64_t x) { o->body_timeout_ms = static_cast<int>(x); }},
      {"idle_timeout_ms", 100, 3600000,
       [o](int64_t x) { o->idle_timeout_ms = static_cast<int>(x); }},
      {"write_timeout_ms", 100, 600000,
       [o](int64_t x) { o->write_timeout_ms = static_cast<int>(x); }},
      {"max_pipelined", 1, 1024, [o](int64_t x) { o->max_pipelined = x; }},
  };
  for (auto f = v.begin(); f != v.end(); ++f) {
    const std::string fp = absl::StrCat(k, ".", f.key());
    auto field = std::find_if(fields.begin(), fields.end(),
                              [&](const Field& x) { return f.key() == x.name; });
    if (field == fields.end()) {
      problems->push_back({fp, "unknown field"});
      continue;
    }
    const Json& x = f.value();
    if (!x.is_number_integer() || x.get<int64_t>() < field->lo || x.get<int64_t>() > field->hi) {
      problems->push_back(
          {fp, absl::StrCat("expected an integer in ", field->lo, "..", field->hi)});
      continue;
    }
    field->set(x.get<int64_t>());
  }
  if (o->max_connections_per_client > o->max_connections) {
    problems->push_back({k + ".max_connections_per_client", "must not exceed max_connections"});
  }
  if (o->max_request_line_bytes > o->max_header_bytes) {
    problems->push_back({k + ".max_request_line_bytes", "must not exceed max_header_bytes"});
  }
}

}  // namespace

namespace {

// The "tls" object: both PEM files, resolved against `base_dir` and readable (their content is
// checked when the server loads them: HttpServer::Bind).
void ParseTls(const Json& v, const std::string& k, const std::string& base_dir,
              http::HttpServerOptions* o, std::vector<core::Problem>* problems) {
  if (!v.is_object()) return problems->push_back({k, "expected an object with cert and key"});
  std::string* targets[] = {&o->tls_cert_file, &o->tls_key_file};
  const char* names[] = {"cert", "key"};
  for (auto f = v.begin(); f != v.end(); ++f) {
    if (f.key() != "cert" && f.key() != "key") {
      problems->push_back({absl::StrCat(k, ".", f.key()), "unknown field (cert, key)"});
    }
  }
  for (int i = 0; i < 2; ++i) {
    const std::string fp = absl::StrCat(k, ".", names[i]);
    auto f = v.find(names[i]);
    if (f == v.end()) {
      problems->push_back({fp, "missing: TLS needs both cert and key (PEM files)"});
      continue;
    }
    if (!f->is_string() || f->get<std::string>().empty()) {
      problems->push_back({fp, "expected a file path"});
      continue;
    }
    std::string path = f->get<std::string>();
    if (path.front() != '/' && !base_dir.empty()) path = absl::StrCat(base_dir, "/", path);
    std::ifstream in(path);
    if (!in) {
      problems->push_back({fp, absl::StrCat("cannot read ", path, ": ", std::strerror(errno))});
      continue;
    }
    *targets[i] = path;
  }
}

}  // namespace

std::optional<ServeConfig> ParseServeConfig(std::string_view text, ServeConfig config,
                                            std::vector<core::Problem>* problems,
                                            const std::string& base_dir) {
  size_t before = problems->size();
  auto json = core::ParseJsonText(text, problems);
  if (!json) return std::nullopt;
  if (!json->is_object()) {
    problems->push_back({"", "expected an object"});
    return std::nullopt;
  }
  auto str = [&](const Json& v, const std::string& path, std::string* out) {
    if (!v.is_string()) return problems->push_back({path, "expected a string"});
    *out = v.get<std::string>();
  };
  auto integer = [&](const Json& v, const std::string& path, int64_t lo, int64_t hi, auto* out) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return problems->push_back({path, absl::StrCat("expected an integer in ", lo, "..", hi)});
    }
    *out = static_cast<std::remove_reference_t<decltype(*out)>>(v.get<int64_t>());
  };
  for (auto it = json->begin(); it != json->end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "listen") {
      str(v, k, &config.listen);
    } else if (k == "db") {
      str(v, k, &config.db);
    } else if (k == "algorithm") {
      str(v, k, &config.controller.algorithm);
    } else if (k == "batch_hysteresis") {
      // InGo (docs/batch-size.md): relative improvement needed to change batch sizes.
      if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1)) {
        problems->push_back({k, "expected a number in [0, 1)"});
      } else {
        config.controller.batch_hysteresis = v.get<double>();
      }
    } else if (k == "batch_min_interval_ms") {
      integer(v, k, 0, 86400000, &config.controller.batch_min_interval_ms);
    } else if (k == "memory_policy") {
      str(v, k, &config.controller.memory_policy);
    } else if (k == "seed") {
      integer(v, k, 0, INT64_MAX, &config.controller.seed);
    } else if (k == "rounds") {
      integer(v, k, 0, 10000, &config.controller.rounds);
    } else if (k == "paths") {
      integer(v, k, 1, 64, &config.controller.paths);
    } else if (k == "spread_min_columns") {
      integer(v, k, -1, INT64_MAX, &config.controller.spread_min_columns);
    } else if (k == "split_max_ranges") {
      integer(v, k, 0, core::kTagSlotsPerJob, &config.controller.split_max_ranges);
    } else if (k == "timer_ms") {
      integer(v, k, 100, 3600000, &config.controller.timer_ms);
    } else if (k == "counters_period_ms") {
      integer(v, k, 0, 3600000, &config.controller.counters_period_ms);
    } else if (k == "debounce_ms") {
      integer(v, k, 0, 60000, &config.controller.debounce_ms);
    } else if (k == "election_id") {
      int64_t id = 0;
      integer(v, k, 0, INT64_MAX, &id);
      config.controller.election_id = southbound::ElectionId{0, static_cast<uint64_t>(id)};
    } else if (k == "incremental") {
      // Incremental planning (docs/controller.md): admission on the loop, full re-plan behind it.
      if (!v.is_boolean()) {
        problems->push_back({k, "expected true or false"});
      } else {
        config.controller.incremental = v.get<bool>();
      }
    } else if (k == "replan_budget_ms") {
      integer(v, k, 0, 3600000, &config.controller.replan_budget_ms);
    } else if (k == "replan_move_threshold") {
      // A negative value turns stability off (every re-plan may move every job).
      if (!v.is_number() || !(v.get<double>() >= -1 && v.get<double>() <= 100)) {
        problems->push_back({k, "expected a number in [-1, 100]"});
      } else {
        config.controller.replan_move_threshold = v.get<double>();
      }
    } else if (k == "retention") {
      if (!v.is_object()) {
        problems->push_back({k, "expected an object"});
        continue;
      }
      server::RetentionOptions& r = config.controller.retention;
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fp = absl::StrCat(k, ".", f.key());
        int64_t days = 0;
        if (f.key() == "finished_jobs_days") {
          integer(f.value(), fp, 0, kMaxRetentionDays, &days);
          r.finished_jobs_ms = days * server::RetentionOptions::kDayMs;
        } else if (f.key() == "audit_days") {
          integer(f.value(), fp, 0, kMaxRetentionDays, &days);
          r.audit_ms = days * server::RetentionOptions::kDayMs;
        } else {
          problems->push_back({fp, "unknown field (finished_jobs_days, audit_days)"});
        }
      }
    } else if (k == "shutdown_grace_ms") {
      integer(v, k, 0, 600000, &config.shutdown_grace_ms);
    } else if (k == "cluster") {
      if (!v.is_object()) {
        problems->push_back({k, "expected an object"});
        continue;
      }
      for (auto f = v.begin(); f != v.end(); ++f) {
        std::string fp = absl::StrCat(k, ".", f.key());
        if (f.key() == "endpoints") {
          if (!f.value().is_array()) {
            problems->push_back({fp, "expected an array of etcd URLs"});
            continue;
          }
          config.cluster.endpoints.clear();
          for (size_t i = 0; i < f.value().size(); ++i) {
            std::string url;
            str(f.value()[i], absl::StrCat(fp, "[", i, "]"), &url);
            config.cluster.endpoints.push_back(url);
          }
        } else if (f.key() == "node_id") {
          str(f.value(), fp, &config.cluster.node_id);
        } else if (f.key() == "lease_ttl_s") {
          integer(f.value(), fp, 2, 600, &config.cluster.lease_ttl_s);
        } else if (f.key() == "advertise_url") {
          str(f.value(), fp, &config.cluster.advertise_url);
        } else if (f.key() == "prefix") {
          str(f.value(), fp, &config.cluster.prefix);
        } else {
          problems->push_back(
              {fp, "unknown field (endpoints, node_id, lease_ttl_s, advertise_url, prefix)"});
        }
      }
    } else if (k == "http") {
      ParseHttpLimits(v, k, &config.http, problems);
    } else if (k == "tls") {
      ParseTls(v, k, base_dir, &config.http, problems);
    } else if (k == "allow_insecure_http") {
      if (!v.is_boolean()) {
        problems->push_back({k, "expected true or false"});
      } else {
        config.allow_insecure_http = v.get<bool>();
      }
    } else if (k == "tokens") {
      if (!v.is_array()) {
        problems->push_back({k, "expected an array"});
        continue;
      }
      for (size_t i = 0; i < v.size(); ++i) {
        std::string p = absl::StrCat("tokens[", i, "]");
        const Json& t = v[i];
        if (!t.is_object()) {
          problems->push_back({p, "expected an object"});
          continue;
        }
        northbound::ApiToken token;
        std::string role;
        for (auto f = t.begin(); f != t.end(); ++f) {
          std::string fp = absl::StrCat(p, ".", f.key());
          if (f.key() == "name")
            str(f.value(), fp, &token.name);
          else if (f.key() == "token")
            str(f.value(), fp, &token.token);
          else if (f.key() == "role")
            str(f.value(), fp, &role);
          else if (f.key() == "tenant")
            str(f.value(), fp, &token.tenant);
          else
            problems->push_back({fp, "unknown field"});
        }
        auto r = northbound::ParseRole(role);
        if (!r) {
          problems->push_back(
              {p + ".role",
               absl::StrCat("must be admin, operator, viewer or worker, got \"", role, "\"")});
        } else {
          token.role = *r;
        }
        if (token.token.size() < 16)
          problems->push_back({p + ".token", "must be at least 16 characters"});
        if (token.name.empty()) token.name = absl::StrCat("token", i);
        if (token.role == northbound::Role::kWorker && token.tenant.empty()) {
          problems->push_back(
              {p + ".tenant", "a worker token needs the tenant whose jobs it serves"});
        }
        for (const northbound::ApiToken& other : config.tokens) {
          if (other.token == token.token) problems->push_back({p + ".token", "duplicate token"});
        }
        config.tokens.push_back(token);
      }
    } else {
      problems->push_back({k, "unknown field"});
    }
  }
  if (auto s = CheckListenAllowed(config); !s.ok()) {
    problems->push_back({"listen", std::string(s.message())});
  }
  if (problems->size() != before) return std::nullopt;
  return config;
}

absl::Status CheckListenAllowed(const ServeConfig& config) {
  std::string host;
  int port = 0;
  if (auto s = http::SplitHostPort(config.listen, &host, &port); !s.ok()) return s;
  return northbound::CheckListenRule(
      host, !config.tokens.empty(),
      !config.http.tls_cert_file.empty() && !config.http.tls_key_file.empty(),
      config.allow_insecure_http);
}

}  // namespace inac::cli
