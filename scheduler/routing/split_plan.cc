#include "scheduler/routing/split_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "scheduler/routing/grid_split.h"

namespace inac::scheduler {
namespace {

constexpr double kQuantum = 1.0 / 1024;  // cut points of the chunk ranges
constexpr double kEps = 1e-12;

// Circle layout: the streams (y, switch), largest first, laid end to end on a circle of
// circumference 1; their end points (on the 1/1024 grid; the smallest streams dropped until at
// most `max_ranges` ranges) cut the shard, then the longest range is halved while the budget
// allows (smaller units follow the LP's path splits better). cover[r]: the switches whose arc
// holds range r.
void CircleLayout(std::vector<std::pair<double, int>> streams, int max_ranges,
                  std::vector<double>* cuts, std::vector<std::vector<int>>* cover) {
  std::vector<std::pair<int, std::pair<double, double>>> arcs;  // switch, (begin, length)
  while (true) {
    arcs.clear();
    std::set<int64_t> q = {0, 1024};
    double pos = 0;
    for (const auto& [neg, a] : streams) {
      arcs.push_back({a, {pos, -neg}});
      pos += -neg;
      q.insert(std::llround(std::fmod(pos, 1.0) * 1024) % 1024);
    }
    if (static_cast<int>(q.size()) - 1 <= max_ranges || streams.empty()) {
      cuts->clear();
      for (int64_t v : q) cuts->push_back(static_cast<double>(v) * kQuantum);
      break;
    }
    streams.pop_back();
  }
  while (static_cast<int>(cuts->size()) - 1 < max_ranges) {
    int longest = -1;
    for (size_t r = 0; r + 1 < cuts->size(); ++r) {
      if (longest < 0 ||
          (*cuts)[r + 1] - (*cuts)[r] > (*cuts)[longest + 1] - (*cuts)[longest] + 1e-12) {
        longest = static_cast<int>(r);
      }
    }
    const double len = (*cuts)[longest + 1] - (*cuts)[longest];
    if (len < 2 * kQuantum - 1e-12) break;
    const double mid = (*cuts)[longest] + std::floor(len / 2 / kQuantum + 0.5) * kQuantum;
    cuts->insert(cuts->begin() + longest + 1, mid);
  }
  const int n = static_cast<int>(cuts->size()) - 1;
  cover->assign(n, {});
  for (int r = 0; r < n; ++r) {
    const double mid = ((*cuts)[r] + (*cuts)[r + 1]) / 2;
    for (const auto& [a, bl] : arcs) {
      const double rel = std::fmod(mid - std::fmod(bl.first, 1.0) + 2.0, 1.0);
      if (rel < bl.second || bl.second >= 1 - 1e-12) (*cover)[r].push_back(a);
    }
  }
}

// Strip layout: `max_ranges` equal ranges, each needing `workers` inputs. A switch whose LP
// stream is y_a and inbound budget b_a (Σ_w f_{w,a}) serves on average n_a = min(64, b_a / y_a)
// workers on each of its ranges; switches in decreasing n_a take round(y_a · ranges) (at least
// one) of the ranges with the largest unserved count -- filling the strip [0, 1) × [0, workers]
// with the LP's (width y_a, height n_a) rectangles, so each range can seat every worker within the
// fan-in. A switch's ranges need not be adjacent (one tag each).
void StripLayout(const std::vector<std::pair<double, int>>& streams,
                 const std::map<int, double>& budget, int workers, int max_ranges,
                 std::vector<double>* cuts, std::vector<std::vector<int>>* cover) {
  const int n = std::max(1, max_ranges);
  cuts->clear();
  for (int r = 0; r <= n; ++r) {
    cuts->push_back(static_cast<double>(std::llround(1024.0 * r / n)) * kQuantum);
  }
  cover->assign(n, {});
  std::vector<std::tuple<double, double, int>> rects;  // (-n_a, y_a, switch)
  for (const auto& [neg, a] : streams) {
    auto it = budget.find(a);
    const double b = it == budget.end() ? 0 : it->second;
    const double height = std::min<double>(kMaxFanIn, b / -neg);
    if (height > 1e-6) rects.emplace_back(-height, -neg, a);
  }
  std::sort(rects.begin(), rects.end());
  std::vector<double> unserved(n, workers);
  for (const auto& [neg_h, y, a] : rects) {
    int take = std::clamp(static_cast<int>(std::llround(y * n)), 1, n);
    std::vector<int> order(n);
    for (int r = 0; r < n; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(),
                     [&](int u, int v) { return unserved[u] > unserved[v] + 1e-9; });
    for (int k = 0; k < take; ++k) {
      (*cover)[order[k]].push_back(a);
      unserved[order[k]] += neg_h;
    }
  }
}

}  // namespace

SplitPlan::SplitPlan(const Network& net, const std::vector<double>& residual,
                     const JobCandidates& c)
    : net_(net), c_(c), loads_(residual, net.num_resources()) {
  cuts_.resize(c.ps.size());
  assign_.resize(c.pairs.size());
}

void SplitPlan::Realise(const RoutingLp::JobColumns& cols, const std::vector<double>& values,
                        double lambda, bool strip, int max_ranges) {
  for (size_t si = 0; si < c_.ps.size(); ++si) {
    const int s = c_.ps[si];
    const double unit = c_.shares[si] * lambda;
    std::vector<std::pair<double, int>> streams;  // (-y, switch)
    if (unit > kEps) {
      for (const auto& [key, ys] : cols.y) {
        if (key.second != s) continue;
        double y = 0;
        for (int col : ys) y += std::max(0.0, values[col]);
        y = std::min(1.0, y / unit);
        if (y > 1e-3) streams.emplace_back(-y, key.first);
      }
    }
    std::sort(streams.begin(), streams.end());
    // What the LP sends into each switch (fractions of the shard, summed over workers): the
    // realisation keeps each switch near it.
    std::map<int, double> budget;
    int shard_workers = 0;
    for (size_t i = 0; i < c_.pairs.size(); ++i) {
      const PairCandidates& pc = c_.pairs[i];
      if (static_cast<size_t>(pc.ps_index) != si) continue;
      ++shard_workers;
      if (unit <= kEps) continue;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        for (int col : cols.r[i][o]) {
          budget[pc.options[o].agg] += std::max(0.0, values[col]) / unit;
        }
      }
    }
    std::vector<double> cuts;
    std::vector<std::vector<int>> cover;
    if (strip) {
      StripLayout(streams, budget, shard_workers, max_ranges, &cuts, &cover);
    } else {
      CircleLayout(streams, max_ranges, &cuts, &cover);
    }
    std::set<int> in_layout;
    for (const auto& list : cover) in_layout.insert(list.begin(), list.end());
    cuts_[si] = cuts;
    const int n_ranges = static_cast<int>(cuts.size()) - 1;
    // Ranges in decreasing length.
    std::vector<int> order(n_ranges);
    for (int r = 0; r < n_ranges; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return cuts[a + 1] - cuts[a] > cuts[b + 1] - cuts[b]; });
    for (size_t i = 0; i < c_.pairs.size(); ++i) {
      const PairCandidates& pc = c_.pairs[i];
      if (static_cast<size_t>(pc.ps_index) != si) continue;
      std::vector<double> rem(pc.options.size(), 0.0);
      int ps_option = 0;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        for (int col : cols.r[i][o]) rem[o] += std::max(0.0, values[col]);
        rem[o] = unit > kEps ? rem[o] / unit : 0;
        if (pc.options[o].agg == s) ps_option = static_cast<int>(o);
      }
      assign_[i].assign(n_ranges, {ps_option, BestLpPath(cols, values, i, ps_option)});
      for (int r : order) {
        const double len = cuts[r + 1] - cuts[r];
        int best = -1;
        bool best_fits = false;  // the switch's LP inbound budget still covers the range
        for (int a : cover[r]) {
          if (fan_in_[{a, s, r}] >= kMaxFanIn) continue;
          const bool fits = budget[a] >= len * 0.5;
          for (size_t o = 0; o < pc.options.size(); ++o) {
            if (pc.options[o].agg != a) continue;
            // Within the budget: the worker's own LP preference; all over it: the switch
            // least over its budget.
            const bool better =
                best >= 0 && (fits ? rem[o] > rem[best] + 1e-12
                                   : budget[a] > budget[pc.options[best].agg] + 1e-12);
            if (best < 0 || (fits && !best_fits) || (fits == best_fits && better)) {
              best = static_cast<int>(o);
              best_fits = fits;
            }
          }
        }
        // No covering switch with room among the worker's options: a switch that already
        // aggregates the range, then one that aggregates the shard, then the PS.
        for (int pass = 0; best < 0 && pass < 2; ++pass) {
          for (size_t o = 0; o < pc.options.size(); ++o) {
            const int a = pc.options[o].agg;
            if (a == s) continue;
            const int fan = fan_in_[{a, s, r}];
            if (fan >= kMaxFanIn || (pass == 0 && fan == 0)) continue;
            if (pass == 1 && !in_layout.count(a)) continue;
            if (best < 0 || rem[o] > rem[best] + 1e-12) best = static_cast<int>(o);
          }
        }
        if (best < 0) best = ps_option;
        rem[best] -= len;
        budget[pc.options[best].agg] -= len;
        assign_[i][r] = {best, BestLpPath(cols, values, i, best)};
        if (best != ps_option) fan_in_[{pc.options[best].agg, s, r}]++;
      }
    }
  }
  fan_in_.clear();
  for (size_t i = 0; i < c_.pairs.size(); ++i) {
    for (size_t r = 0; r < assign_[i].size(); ++r)
      Apply(static_cast<int>(i), static_cast<int>(r), +1);
  }
}

void SplitPlan::BalancePaths() {
  for (int pass = 0; pass < 4; ++pass) {
    for (size_t i = 0; i < c_.pairs.size(); ++i) {
      for (size_t r = 0; r < assign_[i].size(); ++r) {
        const int ii = static_cast<int>(i);
        const int rr = static_cast<int>(r);
        const AggregationOption& opt = c_.pairs[i].options[assign_[i][r].first];
        if (opt.paths.size() < 2) continue;
        const double x = Amount(ii, rr);
        if (x <= kEps) continue;
        int old = assign_[i][r].second;
        for (int a : opt.paths[old].arcs) loads_.Bump(net_.ArcResource(a), -x);
        int best = old;
        double best_score = kUnbounded;
        for (size_t p = 0; p < opt.paths.size(); ++p) {
          const double cost = PathCost(opt.paths[p], x);
          if (cost < best_score * (1 - 1e-12)) {
            best_score = cost;
            best = static_cast<int>(p);
          }
        }
        assign_[i][r].second = best;
        for (int a : opt.paths[best].arcs) loads_.Bump(net_.ArcResource(a), x);
      }
    }
    for (auto& [key, q] : stream_path_) {
      const double x = StreamAmount(key);
      if (x <= kEps) continue;
      const std::vector<Path>& ps = c_.streams.at(key);
      for (int a : ps[q].arcs) loads_.Bump(net_.ArcResource(a), -x);
      int best = q;
      double best_score = kUnbounded;
      for (size_t p = 0; p < ps.size(); ++p) {
        const double cost = PathCost(ps[p], x);
        if (cost < best_score * (1 - 1e-12)) {
          best_score = cost;
          best = static_cast<int>(p);
        }
      }
      q = best;
      for (int a : ps[q].arcs) loads_.Bump(net_.ArcResource(a), x);
    }
  }
}

double SplitPlan::PathCost(const Path& path, double x) const {
  double cost = 0;
  for (int a : path.arcs) {
    const int r = net_.ArcResource(a);
    const double before = loads_.Ratio(r, loads_.load(r));
    const double after = loads_.Ratio(r, loads_.load(r) + x);
    if (std::isinf(after)) return kUnbounded;
    cost += after * after * after * after - before * before * before * before;
  }
  return cost;
}

int SplitPlan::LocalSearch(int max_moves) {
  int moves = 0;
  while (moves < max_moves && Step()) ++moves;
  return moves;
}

RoutedJob SplitPlan::ToRoutedJob() const {
  RoutedJob rj;
  rj.job = c_.job;
  rj.batch_size = net_.input().jobs[c_.job].spec.batch_size;
  double total = 0;
  for (double x : c_.shares) total += x > kEps ? x : 0;
  for (size_t si = 0; si < c_.ps.size(); ++si) {
    if (c_.shares[si] > kEps) rj.shares.emplace_back(c_.ps[si], c_.shares[si] / total);
  }
  for (size_t i = 0; i < c_.pairs.size(); ++i) {
    const PairCandidates& pc = c_.pairs[i];
    const int si = pc.ps_index;
    if (c_.shares[si] <= kEps) continue;
    const int s = c_.ps[si];
    const std::vector<double>& cuts = cuts_[si];
    size_t first = rj.flows.size();
    for (size_t r = 0; r < assign_[i].size(); ++r) {
      const auto [o, p] = assign_[i][r];
      const double len = cuts[r + 1] - cuts[r];
      const AggregationOption& opt = pc.options[o];
      if (rj.flows.size() > first && r > 0 && assign_[i][r - 1] == assign_[i][r]) {
        rj.flows.back().fraction += len;
        continue;
      }
      rj.flows.push_back(RoutedFlow{pc.worker, s, opt.agg, len, opt.paths[p].arcs});
    }
    // Exact sum 1 despite the additions.
    double sum = 0;
    for (size_t f = first; f < rj.flows.size(); ++f) sum += rj.flows[f].fraction;
    if (rj.flows.size() > first) rj.flows.back().fraction += 1 - sum;
  }
  for (const auto& [w, si] : c_.local) {
    if (c_.shares[si] > kEps) rj.flows.push_back(RoutedFlow{w, c_.ps[si], c_.ps[si], 1.0, {}});
  }
  for (const auto& [key, q] : stream_path_) {
    if (StreamAmount(key) <= kEps) continue;
    rj.streams.push_back(RoutedStream{key.first, key.second, c_.streams.at(key)[q].arcs});
  }
  return rj;
}

int SplitPlan::BestLpPath(const RoutingLp::JobColumns& cols, const std::vector<double>& values,
                          int i, int o) const {
  int best = 0;
  double v = -1;
  for (size_t p = 0; p < cols.r[i][o].size(); ++p) {
    if (values[cols.r[i][o][p]] > v + 1e-12) {
      v = values[cols.r[i][o][p]];
      best = static_cast<int>(p);
    }
  }
  return best;
}

double SplitPlan::Amount(int i, int r) const {
  const int si = c_.pairs[i].ps_index;
  return c_.shares[si] * Length(si, r);
}

int SplitPlan::PsIndexOf(int ps_node) const {
  for (size_t si = 0; si < c_.ps.size(); ++si) {
    if (c_.ps[si] == ps_node) return static_cast<int>(si);
  }
  return -1;
}

double SplitPlan::StreamAmount(const std::pair<int, int>& key) const {
  const int si = PsIndexOf(key.second);
  if (si < 0) return 0;
  double total = 0;
  for (int r = 0; r + 1 < static_cast<int>(cuts_[si].size()); ++r) {
    auto it = fan_in_.find({key.first, key.second, r});
    if (it != fan_in_.end() && it->second > 0) total += Length(si, r);
  }
  return total * c_.shares[si];
}

int SplitPlan::StreamPath(const std::pair<int, int>& key) {
  auto it = stream_path_.find(key);
  if (it == stream_path_.end()) it = stream_path_.emplace(key, 0).first;
  return it->second;
}

void SplitPlan::FlowDelta(int i, int r, int o, int p, int sign, LoadDelta* d) {
  const PairCandidates& pc = c_.pairs[i];
  const AggregationOption& opt = pc.options[o];
  const double x = sign * Amount(i, r);
  for (int a : opt.paths[p].arcs) (*d)[net_.ArcResource(a)] += x;
  const int s = c_.ps[pc.ps_index];
  if (opt.agg == s) {
    if (!opt.paths[p].arcs.empty()) (*d)[net_.NodeResource(s)] += x;
    return;
  }
  (*d)[net_.NodeResource(opt.agg)] += x;
  const int before = FanIn(opt.agg, s, r);
  if ((sign > 0 && before == 0) || (sign < 0 && before == 1)) {
    for (int a : c_.streams.at({opt.agg, s})[StreamPath({opt.agg, s})].arcs) {
      (*d)[net_.ArcResource(a)] += x;
    }
    (*d)[net_.NodeResource(s)] += x;
  }
}

int SplitPlan::FanIn(int agg, int s, int r) const {
  auto it = fan_in_.find({agg, s, r});
  return it == fan_in_.end() ? 0 : it->second;
}

void SplitPlan::Apply(int i, int r, int sign) {
  if (c_.shares[c_.pairs[i].ps_index] <= kEps) return;
  const auto [o, p] = assign_[i][r];
  LoadDelta d;
  FlowDelta(i, r, o, p, sign, &d);
  for (const auto& [res, v] : d) loads_.Bump(res, v);
  const AggregationOption& opt = c_.pairs[i].options[o];
  const int s = c_.ps[c_.pairs[i].ps_index];
  if (opt.agg != s) {
    StreamPath({opt.agg, s});
    fan_in_[{opt.agg, s, r}] += sign;
  }
}

bool SplitPlan::Step() {
  double top = 0;
  double limit = 0;
  std::vector<char> in_b;
  if (!loads_.Bottleneck(&top, &limit, &in_b)) return false;
  // Streams on another path.
  for (auto& [key, q] : stream_path_) {
    const double x = StreamAmount(key);
    if (x <= kEps) continue;
    if (loads_.MoveStream(net_, c_.streams.at(key), x, in_b, limit, &q)) return true;
  }
  // Single (worker, range) flows to another node or path.
  for (size_t i = 0; i < c_.pairs.size(); ++i) {
    const PairCandidates& pc = c_.pairs[i];
    const int s = c_.ps[pc.ps_index];
    if (c_.shares[pc.ps_index] <= kEps) continue;
    for (size_t r = 0; r < assign_[i].size(); ++r) {
      const int ii = static_cast<int>(i);
      const int rr = static_cast<int>(r);
      const auto [o, p] = assign_[i][r];
      const AggregationOption& cur = pc.options[o];
      bool touches =
          cur.agg != s ? in_b[net_.NodeResource(cur.agg)] != 0 : in_b[net_.NodeResource(s)] != 0;
      for (int a : cur.paths[p].arcs) touches |= in_b[net_.ArcResource(a)] != 0;
      if (!touches && cur.agg != s && FanIn(cur.agg, s, rr) == 1) {
        for (int a : c_.streams.at({cur.agg, s})[StreamPath({cur.agg, s})].arcs) {
          touches |= in_b[net_.ArcResource(a)] != 0;
        }
        touches |= in_b[net_.NodeResource(s)] != 0;
      }
      if (!touches) continue;
      LoadDelta removal;
      FlowDelta(ii, rr, o, p, -1, &removal);
      int best_o = -1, best_p = -1;
      double best_score = limit;
      for (size_t o2 = 0; o2 < pc.options.size(); ++o2) {
        const AggregationOption& opt = pc.options[o2];
        if (opt.agg != s) {
          const int fan = FanIn(opt.agg, s, rr) - (static_cast<int>(o2) == o ? 1 : 0);
          if (fan >= kMaxFanIn) continue;
          // Only switches already aggregating this shard (a new stream is rarely a gain).
          if (fan == 0 && StreamAmount({opt.agg, s}) <= kEps) continue;
        }
        for (size_t p2 = 0; p2 < opt.paths.size(); ++p2) {
          if (static_cast<int>(o2) == o && static_cast<int>(p2) == p) continue;
          LoadDelta d;
          if (static_cast<int>(o2) == o) {
            // Same node, another path: only the arcs change.
            for (int a : opt.paths[p].arcs) d[net_.ArcResource(a)] -= Amount(ii, rr);
            for (int a : opt.paths[p2].arcs) d[net_.ArcResource(a)] += Amount(ii, rr);
          } else {
            d = removal;
            FlowDelta(ii, rr, static_cast<int>(o2), static_cast<int>(p2), +1, &d);
          }
          double score;
          if (loads_.Improves(d, in_b, limit, &score) && score < best_score) {
            best_o = static_cast<int>(o2);
            best_p = static_cast<int>(p2);
            best_score = score;
          }
        }
      }
      if (best_o >= 0) {
        Apply(ii, rr, -1);
        assign_[i][r] = {best_o, best_p};
        Apply(ii, rr, +1);
        return true;
      }
    }
  }
  return CloseStream(in_b, limit);
}

bool SplitPlan::CloseStream(const std::vector<char>& in_b, double limit) {
  std::map<std::tuple<int, int, int>, std::vector<int>> inputs;  // (a, s, r) -> pairs
  for (size_t i = 0; i < c_.pairs.size(); ++i) {
    const PairCandidates& pc = c_.pairs[i];
    const int s = c_.ps[pc.ps_index];
    if (c_.shares[pc.ps_index] <= kEps || !in_b[net_.NodeResource(s)]) continue;
    for (size_t r = 0; r < assign_[i].size(); ++r) {
      const int a = pc.options[assign_[i][r].first].agg;
      if (a != s) inputs[{a, s, static_cast<int>(r)}].push_back(static_cast<int>(i));
    }
  }
  std::vector<std::pair<size_t, std::tuple<int, int, int>>> order;
  for (const auto& [key, list] : inputs) order.emplace_back(list.size(), key);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [count, key] : order) {
    const auto [a, s, r] = key;
    const std::vector<int>& list = inputs.at(key);
    LoadDelta d;
    for (int i : list) FlowDelta(i, r, assign_[i][r].first, assign_[i][r].second, -1, &d);
    // FlowDelta drops a's stream of r with the last input only (one input: done above);
    // here every input leaves, so the stream goes once.
    const double x = Amount(list[0], r);
    if (list.size() > 1) {
      for (int arc : c_.streams.at({a, s})[StreamPath({a, s})].arcs) {
        d[net_.ArcResource(arc)] -= x;
      }
      d[net_.NodeResource(s)] -= x;
    }
    std::map<int, int> added;  // switch -> inputs added
    std::vector<std::pair<int, int>> target;
    bool ok = true;
    for (int i : list) {
      const PairCandidates& pc = c_.pairs[i];
      int best_o = -1, best_p = -1;
      double best_peak = kUnbounded;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        const int b = pc.options[o].agg;
        if (b == a || b == s) continue;
        const int fan = FanIn(b, s, r) + added[b];
        if (FanIn(b, s, r) == 0 || fan >= kMaxFanIn) continue;
        for (size_t p = 0; p < pc.options[o].paths.size(); ++p) {
          double peak = loads_.Ratio(net_.NodeResource(b), loads_.load(net_.NodeResource(b)) +
                                                               d[net_.NodeResource(b)] + x);
          for (int arc : pc.options[o].paths[p].arcs) {
            const int res = net_.ArcResource(arc);
            peak = std::max(peak, loads_.Ratio(res, loads_.load(res) + d[res] + x));
          }
          if (peak < best_peak * (1 - 1e-12)) {
            best_peak = peak;
            best_o = static_cast<int>(o);
            best_p = static_cast<int>(p);
          }
        }
      }
      if (best_o < 0) {
        ok = false;
        break;
      }
      ++added[pc.options[best_o].agg];
      d[net_.NodeResource(pc.options[best_o].agg)] += x;
      for (int arc : pc.options[best_o].paths[best_p].arcs) d[net_.ArcResource(arc)] += x;
      target.emplace_back(best_o, best_p);
    }
    double score;
    if (!ok || !loads_.Improves(d, in_b, limit, &score)) continue;
    for (int i : list) Apply(i, r, -1);
    for (size_t k = 0; k < list.size(); ++k) {
      assign_[list[k]][r] = target[k];
      Apply(list[k], r, +1);
    }
    return true;
  }
  return false;
}

}  // namespace inac::scheduler
