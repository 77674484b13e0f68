// RoundChoice and LocalSearch of scheduler/routing/routing_lp.h: from the LP's fractional routing
// to one integral routing per job, then improving moves on it.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "scheduler/routing/routing_lp.h"
#include "scheduler/routing/search_load.h"

namespace inac::scheduler {
namespace {

// Uniform double in [0, 1) from 53 random bits (same on every platform).
double Uniform(std::mt19937_64* rng) { return static_cast<double>((*rng)() >> 11) * 0x1.0p-53; }

// A weight as Pick and Apportion count it: LP values at or below 1e-12 are noise and count as 0
// (both must agree, or a total made of noise deals a member to index -1).
double Weight(double v) { return v > 1e-12 ? v : 0.0; }

// Index drawn in proportion to `w` (argmax when rng is null); -1 exactly when no weight counts
// (Weight(v) == 0 for every v); otherwise an index of a counted weight.
int Pick(const std::vector<double>& w, std::mt19937_64* rng) {
  double total = 0;
  int best = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    const double v = Weight(w[i]);
    total += v;
    if (v > 0 && (best < 0 || v > w[best] * (1 + 1e-9))) best = static_cast<int>(i);
  }
  if (best < 0) return -1;
  if (rng == nullptr) return best;
  double u = Uniform(rng) * total;
  for (size_t i = 0; i < w.size(); ++i) {
    const double v = Weight(w[i]);
    if (v > 0 && u < v) return static_cast<int>(i);
    u -= v;
  }
  return best;  // rounding left u at the end
}

// Deals `m` members over weights `w` (negative weights count as 0): without `rng` by largest
// remainders (ties to the lower index; m = 1: Pick's argmax), with `rng` by m independent draws
// in proportion to `w` (m = 1: Pick's draw). Counts per index; all 0 when the weights sum to ~0.
std::vector<int> Apportion(const std::vector<double>& w, int m, std::mt19937_64* rng) {
  std::vector<int> n(w.size(), 0);
  double total = 0;
  int last = -1;  // the last index of counted weight
  for (size_t i = 0; i < w.size(); ++i) {
    total += Weight(w[i]);
    if (Weight(w[i]) > 0) last = static_cast<int>(i);
  }
  if (last < 0 || m <= 0) return n;
  if (rng == nullptr && m == 1) {
    n[Pick(w, nullptr)] = 1;  // >= 0: some weight counts
    return n;
  }
  int dealt = 0;
  if (rng == nullptr) {
    std::vector<double> remainder(w.size(), -1.0);  // uncounted weights never get a leftover
    for (size_t i = 0; i < w.size(); ++i) {
      if (Weight(w[i]) <= 0) continue;
      const double quota = m * Weight(w[i]) / total;
      n[i] = static_cast<int>(std::floor(quota + 1e-9));
      remainder[i] = quota - n[i];
      dealt += n[i];
    }
    std::vector<int> order(w.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return remainder[a] > remainder[b]; });
    for (size_t k = 0; dealt < m && k < order.size() && Weight(w[order[k]]) > 0; ++k, ++dealt) {
      ++n[order[k]];
    }
  } else {
    // Independent draws: the random rounds exist for their diversity (systematic sampling from
    // one offset gave nearly the same plan every round: k=16 / 256 workers 17.3 instead of 18.4
    // Gbps).
    for (; dealt < m; ++dealt) ++n[Pick(w, rng)];
  }
  n[last] += m - dealt;  // rounding leftovers (none in exact arithmetic)
  return n;
}

}  // namespace

Choice RoundChoice(const JobCandidates& c, const RoutingLp::JobColumns& cols,
                   const std::vector<double>& values, std::mt19937_64* rng) {
  Choice ch;
  ch.pair.assign(c.pairs.size(), {0, 0});
  for (size_t i = 0; i < cols.r.size(); ++i) {
    const std::vector<int>& members = cols.members[i];
    const int m = static_cast<int>(members.size());
    std::vector<double> option_rate(cols.r[i].size(), 0.0);
    for (size_t o = 0; o < option_rate.size(); ++o) {
      for (int col : cols.r[i][o]) option_rate[o] += std::max(0.0, values[col]);
    }
    const std::vector<int> per_option = Apportion(option_rate, m, rng);
    size_t next = 0;  // members dealt so far, in order
    for (size_t o = 0; o < per_option.size(); ++o) {
      if (per_option[o] == 0) continue;
      std::vector<double> path_rate;
      for (int col : cols.r[i][o]) path_rate.push_back(values[col]);
      std::vector<int> per_path = Apportion(path_rate, per_option[o], rng);
      if (per_path.empty()) continue;  // no path columns: the members keep path (0, 0)
      if (std::all_of(per_path.begin(), per_path.end(), [](int k) { return k == 0; })) {
        per_path[0] = per_option[o];
      }
      for (size_t p = 0; p < per_path.size(); ++p) {
        for (int k = 0; k < per_path[p]; ++k) {
          ch.pair[members[next++]] = {static_cast<int>(o), static_cast<int>(p)};
        }
      }
    }
  }
  for (const auto& [key, ys] : cols.y) {
    std::vector<double> w;
    for (int col : ys) w.push_back(values[col]);
    ch.stream[key] = std::max(0, Pick(w, rng));
  }
  return ch;
}

namespace {

using Delta = LoadDelta;  // scheduler/routing/search_load.h

// Incremental state of one job's integral routing for the local search.
class Searcher {
 public:
  Searcher(const Network& net, const std::vector<double>& residual, const JobCandidates& c,
           Choice* ch)
      : net_(net), c_(c), ch_(*ch), loads_(residual, net.num_resources()) {
    for (size_t i = 0; i < c_.pairs.size(); ++i) ApplyPair(static_cast<int>(i), +1);
  }

  // One improving move; false when none exists.
  bool Step() {
    double top = 0;
    double limit = 0;
    std::vector<char> in_b;
    if (!loads_.Bottleneck(&top, &limit, &in_b)) return false;
    for (size_t i = 0; i < c_.pairs.size(); ++i) {
      if (Share(i) <= 1e-12 || !Touches(static_cast<int>(i), in_b)) continue;
      if (TryPair(static_cast<int>(i), in_b, limit)) return true;
    }
    for (auto& [key, q] : ch_.stream) {
      if (Users(key) == 0) continue;
      if (loads_.MoveStream(net_, c_.streams.at(key), StreamShare(key), in_b, limit, &q)) {
        return true;
      }
    }
    for (const auto& [key, users] : users_) {
      if (users == 0) continue;
      const Path& path = c_.streams.at(key)[StreamPath(key)];
      bool touches = in_b[net_.NodeResource(key.second)] != 0;
      for (int a : path.arcs) touches |= in_b[net_.ArcResource(a)] != 0;
      if (touches && TryClose(key, top)) return true;
    }
    return false;
  }

 private:
  // Compound move: the switch of `key` stops aggregating for its PS; each of its flows goes to
  // its best option among the PS and the switches already aggregating for that PS. Kept when the
  // bottleneck utilisation falls (or as many resources fewer sit at it).
  bool TryClose(std::pair<int, int> key, double top) {
    int before_count = 0;
    loads_.MaxRatio(&before_count);
    std::vector<std::pair<int, std::pair<int, int>>> saved;
    for (size_t i = 0; i < c_.pairs.size(); ++i) {
      const PairCandidates& pc = c_.pairs[i];
      if (c_.ps[pc.ps_index] != key.second || Share(i) <= 1e-12) continue;
      if (pc.options[ch_.pair[i].first].agg != key.first) continue;
      saved.emplace_back(static_cast<int>(i), ch_.pair[i]);
    }
    for (const auto& [i, old] : saved) ApplyPair(i, -1);
    for (const auto& [i, old] : saved) {
      const PairCandidates& pc = c_.pairs[i];
      int s = c_.ps[pc.ps_index];
      double x = Share(i);
      int best_o = -1, best_p = -1;
      double best = kUnbounded;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        int agg = pc.options[o].agg;
        if (agg == key.first || (agg != s && Users({agg, s}) == 0)) continue;
        for (size_t p = 0; p < pc.options[o].paths.size(); ++p) {
          Delta d;
          FlowResources(i, static_cast<int>(o), static_cast<int>(p), x, &d);
          double worst = 0;
          for (const auto& [r, v] : d) worst = std::max(worst, loads_.Ratio(r, loads_.load(r) + v));
          if (worst < best * (1 - 1e-12)) {
            best = worst;
            best_o = static_cast<int>(o);
            best_p = static_cast<int>(p);
          }
        }
      }
      if (best_o < 0) {
        best_o = old.first;
        best_p = old.second;
      }
      ch_.pair[i] = {best_o, best_p};
      ApplyPair(i, +1);
    }
    int after_count = 0;
    double after = loads_.MaxRatio(&after_count);
    if (after < top * (1 - 1e-9) || (after <= top * (1 + 1e-12) && after_count < before_count)) {
      return true;
    }
    for (const auto& [i, old] : saved) ApplyPair(i, -1);
    for (const auto& [i, old] : saved) {
      ch_.pair[i] = old;
      ApplyPair(i, +1);
    }
    return false;
  }

  double Share(size_t i) const { return c_.shares[c_.pairs[i].ps_index]; }
  double StreamShare(const std::pair<int, int>& key) const {
    for (size_t si = 0; si < c_.ps.size(); ++si) {
      if (c_.ps[si] == key.second) return c_.shares[si];
    }
    return 0;
  }
  int Users(const std::pair<int, int>& key) const {
    auto it = users_.find(key);
    return it == users_.end() ? 0 : it->second;
  }
  // Resources of pair i's current flow (not its stream).
  void FlowResources(int i, int o, int p, double x, Delta* d) const {
    const AggregationOption& opt = c_.pairs[i].options[o];
    for (int a : opt.paths[p].arcs) (*d)[net_.ArcResource(a)] += x;
    (*d)[net_.NodeResource(opt.agg)] += x;
  }
  void StreamResources(const std::pair<int, int>& key, int q, double x, Delta* d) const {
    for (int a : c_.streams.at(key)[q].arcs) (*d)[net_.ArcResource(a)] += x;
    (*d)[net_.NodeResource(key.second)] += x;
  }
  int StreamPath(const std::pair<int, int>& key) {
    auto it = ch_.stream.find(key);
    if (it == ch_.stream.end()) it = ch_.stream.emplace(key, 0).first;
    return it->second;
  }
  void ApplyPair(int i, int sign) {
    const PairCandidates& pc = c_.pairs[i];
    double x = Share(i);
    if (x <= 1e-12) return;
    auto [o, p] = ch_.pair[i];
    Delta d;
    FlowResources(i, o, p, sign * x, &d);
    int s = c_.ps[pc.ps_index];
    int agg = pc.options[o].agg;
    if (agg != s) {
      std::pair<int, int> key{agg, s};
      int before = Users(key);
      users_[key] = before + sign;
      if ((sign > 0 && before == 0) || (sign < 0 && before == 1)) {
        StreamResources(key, StreamPath(key), sign * x, &d);
      }
    }
    for (const auto& [r, v] : d) loads_.Bump(r, v);
  }
  bool Touches(int i, const std::vector<char>& in_b) const {
    const PairCandidates& pc = c_.pairs[i];
    auto [o, p] = ch_.pair[i];
    const AggregationOption& opt = pc.options[o];
    for (int a : opt.paths[p].arcs) {
      if (in_b[net_.ArcResource(a)]) return true;
    }
    if (in_b[net_.NodeResource(opt.agg)]) return true;
    return false;
  }
  bool TryPair(int i, const std::vector<char>& in_b, double limit) {
    const PairCandidates& pc = c_.pairs[i];
    const double x = Share(i);
    const int s = c_.ps[pc.ps_index];
    auto [o, p] = ch_.pair[i];
    Delta removal;
    FlowResources(i, o, p, -x, &removal);
    int old_agg = pc.options[o].agg;
    if (old_agg != s && Users({old_agg, s}) == 1) {
      StreamResources({old_agg, s}, StreamPath({old_agg, s}), -x, &removal);
    }
    int best_o = -1, best_p = -1, best_q = -1;
    double best_score = limit;
    for (size_t o2 = 0; o2 < pc.options.size(); ++o2) {
      const AggregationOption& opt = pc.options[o2];
      bool needs_stream = opt.agg != s && opt.agg != old_agg && Users({opt.agg, s}) == 0;
      bool reopen = opt.agg != s && opt.agg == old_agg;  // same switch: stream unchanged
      for (size_t p2 = 0; p2 < opt.paths.size(); ++p2) {
        if (static_cast<int>(o2) == o && static_cast<int>(p2) == p) continue;
        int q_count = needs_stream ? static_cast<int>(c_.streams.at({opt.agg, s}).size()) : 1;
        for (int q2 = 0; q2 < q_count; ++q2) {
          Delta d = removal;
          if (reopen && Users({old_agg, s}) == 1) {
            // Undo the stream removal: the switch keeps aggregating.
            StreamResources({old_agg, s}, StreamPath({old_agg, s}), x, &d);
          }
          FlowResources(i, static_cast<int>(o2), static_cast<int>(p2), x, &d);
          if (needs_stream) StreamResources({opt.agg, s}, q2, x, &d);
          double score;
          if (loads_.Improves(d, in_b, limit, &score) && score < best_score) {
            best_o = static_cast<int>(o2);
            best_p = static_cast<int>(p2);
            best_q = needs_stream ? q2 : -1;
            best_score = score;
          }
        }
      }
    }
    if (best_o < 0) return false;
    ApplyPair(i, -1);
    ch_.pair[i] = {best_o, best_p};
    if (best_q >= 0) ch_.stream[{pc.options[best_o].agg, s}] = best_q;
    ApplyPair(i, +1);
    return true;
  }

  const Network& net_;
  const JobCandidates& c_;
  Choice& ch_;
  UnitLoads loads_;
  std::map<std::pair<int, int>, int> users_;
};

}  // namespace

void LocalSearch(const Network& net, const std::vector<double>& residual, const JobCandidates& c,
                 int max_moves, Choice* choice) {
  Searcher searcher(net, residual, c, choice);
  for (int m = 0; m < max_moves; ++m) {
    if (!searcher.Step()) break;
  }
}

}  // namespace inac::scheduler