// Client verbs of the CLI: they call a running controller's REST API (northbound/api_client.h) so
// an operator or a launcher script does not need curl (docs/architecture.md "What the product is").
//
//   inac job submit FILE [--idempotency-key K]   POST /jobs, one request per job of the file
//   inac job list [--state S[,S]] [--tenant T] [--limit N] [--all] [--json]
//   inac job get ID | inac job config ID | inac job cancel ID
//   inac topo apply FILE | inac topo show
//
// Every verb takes --server URL (default $INAC_SERVER, else http://127.0.0.1:8080; http:// or
// https://), --token T (default $INAC_TOKEN) and --ca-cert FILE (default $INAC_CA_CERT: the CA an
// https:// server's certificate must chain to; AddCaCertOption in cli/cli_util.h). Answers go
// to stdout as JSON (job list: a table unless --json). Exit codes: 0 success; 2 bad input or the
// server refused the request (4xx: its error code, message and field are printed on stderr); 1
// the server could not be reached or failed (5xx), or its certificate did not verify
// ("certificate verify failed: ...").
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Adds submit, list, get, config and cancel under `inac job`.
void AddJobClientCommands(CLI::App* job);
// Adds apply and show under `inac topo`.
void AddTopoClientCommands(CLI::App* topo);

}  // namespace inac::cli
