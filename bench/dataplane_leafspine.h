// `dataplane_bench leafspine` (bench/dataplane_leafspine.cc): two jobs sharing the spines of a
// 2x2 BMv2 leaf-spine against one job alone, with and without the workers' congestion control.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace inac::bench {

// Runs the scenario with BMv2 at `bmv2` for each gradient size (bytes), `iterations` all-reduces
// per run; prints one JSON line per size and pacing mode. Needs root. Returns the exit code
// (1 when a lab or a run failed: the folder with the logs is named on stderr).
int RunLeafSpine(const std::string& bmv2, const std::vector<int64_t>& sizes, int iterations);

}  // namespace inac::bench
