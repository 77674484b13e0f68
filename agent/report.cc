#include "agent/report.h"

#include "absl/strings/str_format.h"

namespace inac::agent {

double AlgBwGBps(int64_t size_bytes, double time_ms) {
  if (time_ms <= 0) return 0;
  return static_cast<double>(size_bytes) / (time_ms * 1e-3) / 1e9;
}

double BusBwGBps(double algbw, int workers) {
  if (workers <= 1) return algbw;
  return algbw * 2.0 * (workers - 1) / workers;
}

double InNetworkPercent(int64_t contributions, int64_t in_network) {
  if (contributions < 0 || in_network < 0) return -1;
  if (contributions == 0) return 0;
  return 100.0 * static_cast<double>(in_network) / static_cast<double>(contributions);
}

std::string TableHeader() {
  return absl::StrFormat("#%6s %14s %12s %12s %12s %9s %10s", "iter", "size(B)", "time(ms)",
                         "algbw(GB/s)", "busbw(GB/s)", "retrans", "in-net(%)");
}

namespace {

std::string Share(double percent) {
  return percent < 0 ? std::string("-") : absl::StrFormat("%.1f", percent);
}

std::string SharePercent(double percent) {
  return percent < 0 ? std::string("-") : absl::StrFormat("%.1f%%", percent);
}

struct Totals {
  int64_t size_bytes = 0;
  double time_ms = 0;
  int64_t retransmissions = 0;
  int64_t contributions = -1;
  int64_t in_network = -1;
};

Totals Sum(const std::vector<IterationStats>& iterations) {
  Totals t;
  for (const IterationStats& s : iterations) {
    t.size_bytes = s.size_bytes;
    t.time_ms += s.time_ms;
    t.retransmissions += s.retransmissions;
    if (s.contributions >= 0) {
      t.contributions = std::max<int64_t>(t.contributions, 0) + s.contributions;
      t.in_network = std::max<int64_t>(t.in_network, 0) + s.in_network;
    }
  }
  if (!iterations.empty()) t.time_ms /= static_cast<double>(iterations.size());
  return t;
}

}  // namespace

std::string TableLine(const IterationStats& s, int workers) {
  const double alg = AlgBwGBps(s.size_bytes, s.time_ms);
  // Bandwidths with 4 significant digits: a software switch runs at a few hundred kB/s.
  return absl::StrFormat(" %6d %14d %12.3f %12.4g %12.4g %9d %10s", s.iteration, s.size_bytes,
                         s.time_ms, alg, BusBwGBps(alg, workers), s.retransmissions,
                         Share(InNetworkPercent(s.contributions, s.in_network)));
}

std::string SummaryLine(const std::vector<IterationStats>& iterations, int workers) {
  const Totals t = Sum(iterations);
  const double alg = AlgBwGBps(t.size_bytes, t.time_ms);
  return absl::StrFormat(
      "# iterations: %d  size: %d B  avg time: %.3f ms  algbw: %.4g GB/s  busbw: %.4g GB/s  "
      "retransmissions: %d  in-network: %s",
      iterations.size(), t.size_bytes, t.time_ms, alg, BusBwGBps(alg, workers), t.retransmissions,
      SharePercent(InNetworkPercent(t.contributions, t.in_network)));
}

nlohmann::json IterationJson(const IterationStats& s, int workers) {
  const double alg = AlgBwGBps(s.size_bytes, s.time_ms);
  nlohmann::json j = {{"iteration", s.iteration},
                      {"size_bytes", s.size_bytes},
                      {"time_ms", s.time_ms},
                      {"algbw_gb_per_s", alg},
                      {"busbw_gb_per_s", BusBwGBps(alg, workers)},
                      {"retransmissions", s.retransmissions}};
  const double share = InNetworkPercent(s.contributions, s.in_network);
  j["in_network_share"] = share < 0 ? nlohmann::json() : nlohmann::json(share / 100);
  return j;
}

void AddSummaryJson(const std::vector<IterationStats>& iterations, int workers,
                    nlohmann::json* out) {
  const Totals t = Sum(iterations);
  const double alg = AlgBwGBps(t.size_bytes, t.time_ms);
  nlohmann::json& j = *out;
  j["size_bytes"] = t.size_bytes;
  j["time_ms"] = t.time_ms;
  j["algbw_gb_per_s"] = alg;
  j["busbw_gb_per_s"] = BusBwGBps(alg, workers);
  j["retransmissions"] = t.retransmissions;
  const double share = InNetworkPercent(t.contributions, t.in_network);
  j["in_network_share"] = share < 0 ? nlohmann::json() : nlohmann::json(share / 100);
  nlohmann::json list = nlohmann::json::array();
  for (const IterationStats& s : iterations) list.push_back(IterationJson(s, workers));
  j["iterations"] = list;
}

}  // namespace inac::agent
