// Finds the reference P4 tools the interop tests and bench run against, in the order of
// scripts/find-p4-peers.sh (keep both in step):
//   1. the environment variable ($INAC_BMV2 / $INAC_P4C): a file, or a folder holding the tool;
//   2. PATH;
//   3. the prebuilt toolchain beside the repository, ../shared/peers/bin (INAC_PEERS_BIN, a
//      compile definition set from ${PROJECT_SOURCE_DIR}).
// A candidate counts when it is an executable regular file; the result is its canonical path.
// An environment variable that names nothing usable is skipped (the search goes on), as in the
// script. Nothing is cached: each call searches again. Thread-safe (reads the environment only).
#pragma once

#include <optional>
#include <string>

namespace inac::interop {

// BMv2's simple_switch_grpc (P4Runtime server).
std::optional<std::string> FindBmv2();
// p4c's BMv2 back end, p4c-bm2-ss.
std::optional<std::string> FindP4c();

// What FindBmv2 / FindP4c search, for skip messages, e.g.
// "simple_switch_grpc: $INAC_BMV2 (unset), PATH, /work/shared/peers/bin".
std::string Bmv2SearchDescription();
std::string P4cSearchDescription();

// The folder searched last (INAC_PEERS_BIN; "" when the build did not define it).
std::string PeersBinDir();

}  // namespace inac::interop
