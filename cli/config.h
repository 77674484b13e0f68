// The controller's configuration file (`inac serve --config FILE`), JSON, strict like every INAC
// file: unknown fields and wrong types are errors, each reported with its path.
//
// {
//   "listen": "127.0.0.1:8080",          // host:port of the REST API
//   "db": "inac.db",                     // SQLite file
//   "algorithm": "trees",                // trees|no_ina|atp|atp_sharded|switchml|grid|
//                                        //   grid-split|inart|optimal|ingo
//   "memory_policy": "esa",              // esa|atp|switchml|no_ina
//   "batch_hysteresis": 0.05,            // InGo: gain needed to change batch sizes, [0, 1)
//   "batch_min_interval_ms": 60000,      //   and the least time between a job's changes
//   "seed": 1, "rounds": 8, "paths": 4,
//   "spread_min_columns": 20000,         // spread candidates above this LP size; 0 all, -1 none
//   "split_max_ranges": 0,               // grid-split: ranges per job and PS at most; 0: 64
//   "timer_ms": 2000, "debounce_ms": 50,
//   "counters_period_ms": 2000,          // INA counter reads per switch at most this often
//   "election_id": 0,                    // 0: one above the highest stored (restart wins)
//   "incremental": true,                 // admit on the loop, full re-plan in the background
//   "replan_budget_ms": 10000,           //   CLP time limit of that re-plan (0: 60 s)
//   "replan_move_threshold": 0.1,        //   a running job moves only past this rate gain
//   "shutdown_grace_ms": 1000,           // SIGTERM: wait this long for a solve in progress
//   "retention": {                       // checked at start, then hourly (0 = keep forever)
//     "finished_jobs_days": 7,           // completed/cancelled/failed jobs, their idempotency
//                                        //   keys and events, N days after their last update
//     "audit_days": 90                   // audit log entries of API writes; both 0..3650
//   },
//   "http": {                            // the API server's limits (http/http_server.h);
//     "threads": 16,                     //   every field optional, each range-checked
//     "max_connections": 10000, "max_connections_per_client": 4096,
//     "max_request_line_bytes": 8192, "max_header_bytes": 16384, "max_headers": 100,
//     "max_body_bytes": 1048576, "header_timeout_ms": 10000, "body_timeout_ms": 30000,
//     "idle_timeout_ms": 60000, "write_timeout_ms": 30000, "max_pipelined": 16
//   },
//   "tokens": [{"name": "ops", "token": "<at least 16 chars>", "role": "admin"},
//              {"name": "w", "token": "...", "role": "worker", "tenant": "vision"}],
//   "tls": {                             // HTTPS for the API (both fields required): PEM files,
//     "cert": "tls/cert.pem",            //   the certificate chain (server certificate first)
//     "key": "tls/key.pem"               //   and its unencrypted key; relative paths are resolved
//   },                                   //   against this file's directory
//   "allow_insecure_http": false         // true: serve tokens over plain HTTP beyond loopback
// }
//
// Where the API may listen (CheckListenRule): without tokens only on loopback; with tokens
// beyond loopback only over TLS, unless "allow_insecure_http" (which `inac serve` logs as a
// warning at start). `inac serve --tls-cert/--tls-key/--allow-insecure-http` override the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/validation.h"
#include "northbound/http_api.h"
#include "server/cluster_node.h"
#include "server/controller.h"

namespace inac::cli {

struct ServeConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "inac.db";
  server::ControllerOptions controller;
  std::vector<northbound::ApiToken> tokens;
  // "http": limits of the API server (`workers` is "threads"); "tls" sets `http.tls_cert_file`
  // and `http.tls_key_file`.
  inac::http::HttpServerOptions http;
  bool allow_insecure_http = false;
  // "shutdown_grace_ms": on SIGTERM/SIGINT, how long the loop's current step (a solve) may
  // finish before the process exits without it.
  int64_t shutdown_grace_ms = 1000;
  server::ClusterConfig cluster;
};

// Parses a configuration file's text over the defaults in `config`. nullopt on any problem (all
// appended to `problems`), including a `listen` that CheckListenAllowed refuses.
// `base_dir` is the directory relative paths of the file ("tls") are resolved against (the config
// file's; empty: the working directory); a "tls" file that cannot be read is a problem.
std::optional<ServeConfig> ParseServeConfig(std::string_view text, ServeConfig config,
                                            std::vector<core::Problem>* problems,
                                            const std::string& base_dir = "");

// CheckListenRule for `config` (listen, tokens, http.tls_*, allow_insecure_http); InvalidArgument
// for a malformed `listen`. (HttpApi::Bind enforces the same rule.)
absl::Status CheckListenAllowed(const ServeConfig& config);

}  // namespace inac::cli
