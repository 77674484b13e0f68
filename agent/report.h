// What the agents measure and how they print it, after nccl-tests' all_reduce_perf: one line per
// iteration and a summary, or one JSON object (docs/agents.md, "Output").
//
// Contract:
//  - algbw = size / time in GB/s (1 GB = 1e9 bytes); busbw = algbw * 2 (n - 1) / n for n workers
//    (nccl-tests' factor for all-reduce, so figures compare with NCCL's); n <= 1: busbw = algbw.
//  - The in-network share is contributions that reached the PS inside a packet carrying two or
//    more workers' data / all contributions; unknown (a worker cannot see it) prints "-" / null.
//  - Formatting only: nothing here prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace inac::agent {

struct IterationStats {
  int64_t iteration = 0;
  int64_t size_bytes = 0;
  double time_ms = 0;
  int64_t retransmissions = 0;
  // PS only (-1: unknown): worker contributions counted, and those that arrived in a packet
  // carrying two or more workers' data.
  int64_t contributions = -1;
  int64_t in_network = -1;
};

double AlgBwGBps(int64_t size_bytes, double time_ms);
double BusBwGBps(double algbw, int workers);
// In percent, or a negative value when unknown.
double InNetworkPercent(int64_t contributions, int64_t in_network);

// "#  iter        size(B)    time(ms)  algbw(GB/s)  busbw(GB/s)  retrans  in-net(%)"
std::string TableHeader();
std::string TableLine(const IterationStats& s, int workers);
// "# avg: ..." over `iterations` (time = mean; retransmissions and contributions summed).
std::string SummaryLine(const std::vector<IterationStats>& iterations, int workers);

nlohmann::json IterationJson(const IterationStats& s, int workers);
// Adds time_ms (mean), algbw_gb_per_s, busbw_gb_per_s, retransmissions, in_network_share
// (fraction or null) and `iterations` (array) to `out`.
void AddSummaryJson(const std::vector<IterationStats>& iterations, int workers,
                    nlohmann::json* out);

}  // namespace inac::agent
