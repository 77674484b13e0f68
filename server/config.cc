#include "server/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"

namespace inac::server {

using core::Json;

std::optional<ServeConfig> ParseServeConfig(std::string_view text, ServeConfig config,
                                            std::vector<core::Problem>* problems) {
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
    } else if (k == "memory_policy") {
      str(v, k, &config.controller.memory_policy);
    } else if (k == "seed") {
      integer(v, k, 0, INT64_MAX, &config.controller.seed);
    } else if (k == "rounds") {
      integer(v, k, 0, 10000, &config.controller.rounds);
    } else if (k == "paths") {
      integer(v, k, 1, 64, &config.controller.paths);
    } else if (k == "timer_ms") {
      integer(v, k, 100, 3600000, &config.controller.timer_ms);
    } else if (k == "counters_period_ms") {
      integer(v, k, 0, 3600000, &config.controller.counters_period_ms);
    } else if (k == "debounce_ms") {
      integer(v, k, 0, 60000, &config.controller.debounce_ms);
    } else if (k == "election_id") {
      integer(v, k, 0, INT64_MAX, &config.controller.election_id);
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
        ApiToken token;
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
        auto r = ParseRole(role);
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
        if (token.role == Role::kWorker && token.tenant.empty()) {
          problems->push_back(
              {p + ".tenant", "a worker token needs the tenant whose jobs it serves"});
        }
        for (const ApiToken& other : config.tokens) {
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
  if (auto s = SplitHostPort(config.listen, &host, &port); !s.ok()) return s;
  if (config.tokens.empty() && !IsLoopbackHost(host)) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to listen on ", host,
                     " without API tokens; configure tokens or listen on a loopback address"));
  }
  return absl::OkStatus();
}

absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("expected host:port, got \"", listen, "\""));
  }
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (!absl::SimpleAtoi(listen.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in \"", listen, "\""));
  }
  return absl::OkStatus();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  // Address literals only: "127.evil.example" is a name, not 127.0.0.0/8.
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace inac::server
