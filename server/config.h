// The controller's configuration file (`inac serve --config FILE`), JSON, strict like every INAC
// file: unknown fields and wrong types are errors, each reported with its path.
//
// {
//   "listen": "127.0.0.1:8080",          // host:port of the REST API
//   "db": "inac.db",                     // SQLite file
//   "algorithm": "grid",                 // routing: no_ina|atp|switchml|grid|inart|optimal
//   "memory_policy": "esa",              // esa|atp|switchml|no_ina
//   "seed": 1, "rounds": 8, "paths": 4,
//   "timer_ms": 2000, "debounce_ms": 50,
//   "counters_period_ms": 2000,          // INA counter reads per switch at most this often
//   "election_id": 0,                    // 0: one above the highest stored (restart wins)
//   "tokens": [{"name": "ops", "token": "<at least 16 chars>", "role": "admin"},
//              {"name": "w", "token": "...", "role": "worker", "tenant": "vision"}]
// }
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/validation.h"
#include "server/controller.h"
#include "server/http_api.h"

namespace inac::server {

struct ServeConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "inac.db";
  ControllerOptions controller;
  std::vector<ApiToken> tokens;
};

// Parses a configuration file's text over the defaults in `config`. nullopt on any problem (all
// appended to `problems`), including a `listen` that CheckListenAllowed refuses.
std::optional<ServeConfig> ParseServeConfig(std::string_view text, ServeConfig config,
                                            std::vector<core::Problem>* problems);

// The rule for serving without authentication: with no API token configured every request is
// allowed, so `config.listen` must be a loopback address. FailedPrecondition otherwise,
// InvalidArgument for a malformed `listen`. (HttpApi::Bind enforces the same rule.)
absl::Status CheckListenAllowed(const ServeConfig& config);

// Splits "host:port"; InvalidArgument for a malformed value or a port outside 0..65535.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);
// True for the address literals 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104, and for "localhost";
// false for any other name (even "127.example").
bool IsLoopbackHost(const std::string& host);

}  // namespace inac::server
