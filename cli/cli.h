// The `inac` command line: one binary, verbs per concern (docs/architecture.md "What the product
// is"). Exit codes everywhere: 0 success, 1 failure of the operation, 2 bad input or usage (every
// problem printed on stderr).
#pragma once

namespace inac::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
// `inac serve` in cluster mode: the leader lost its lease and stepped down (docs/ha.md).
inline constexpr int kExitLostLeadership = 3;

// Parses argv, runs the chosen verb, returns the process exit code.
int Main(int argc, char** argv);

}  // namespace inac::cli
