// `inac lab up|down`: a BMv2 lab on one Linux machine (docs/lab.md).
//
//   inac lab up --topology FILE --dir DIR [--bmv2 PATH] [--grpc-base-port P]
//               [--controller-port P] [--no-controller] [--prefix NAME] [--bmv2-log-level L]
//   inac lab down --dir DIR
//
// `up` gives every host of the topology a network namespace with one interface `eth0` (a veth;
// address core::NodeAddress/8, MAC core::NodeMac, static neighbour entries for every other host
// and every switch), runs one BMv2 `simple_switch_grpc` per switch in the root namespace (one port
// per link, numbered core::PortOf, gRPC on loopback), writes DIR/topology.json (the topology with
// every switch's p4runtime endpoint) and, unless --no-controller, starts `inac serve` and PUTs
// the topology to it. Everything it creates is recorded in DIR/lab.json; `down` removes it
// (idempotent). Needs root (network namespaces). Exit codes: 0 ok; 1 failure (BMv2 missing, a
// command failed: its command line and stderr are printed); 2 bad usage or topology.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"

namespace inac::cli {

// Registers the verb on `app`. Its callbacks throw CLI::RuntimeError(code) for a non-zero exit.
void AddLabCommand(CLI::App& app);

// BMv2's simple_switch_grpc, found like scripts/find-p4-peers.sh: `explicit_path` (a file or a
// folder holding it) when not empty, else $INAC_BMV2 (file or folder), then PATH, then
// ../shared/peers/bin beside the repository (the nearest ancestor of this executable, or of the
// working directory, that holds api/p4/ina.p4). NotFound, saying where it looked and how to
// install BMv2, when there is none.
absl::StatusOr<std::string> FindBmv2(const std::string& explicit_path);

}  // namespace inac::cli
