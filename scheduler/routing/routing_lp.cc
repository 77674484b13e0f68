#include "scheduler/routing/routing_lp.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {
namespace {

Path PathFromArcs(const core::Graph& g, int start, const std::vector<int>& arcs) {
  Path p;
  p.nodes.push_back(start);
  for (int a : arcs) p.nodes.push_back(g.arc(a).to);
  p.arcs = arcs;
  return p;
}

void AddPathIfNew(std::vector<Path>* paths, Path p) {
  for (const Path& q : *paths) {
    if (q.arcs == p.arcs) return;
  }
  paths->push_back(std::move(p));
}

// Hop distances from a node's single switch neighbour when single-homed (cheaper to cache).
int HopsBetween(PathCache& paths, const core::Graph& g, int from, int to) {
  int extra = 0;
  if (g.is_host(from) && g.out_arcs(from).size() == 1) {
    from = g.arc(g.out_arcs(from)[0]).to;
    extra = 1;
  }
  int d = paths.HopsFrom(from)[to];
  return d < 0 ? -1 : d + extra;
}

// The fan-in cuts of BuildRoutingLp (see routing_lp.h).
void AddFanInCuts(const JobCandidates& c, const RoutingLp::JobColumns& cols, int lambda,
                  bool free_shares, int max_fan_in, lp::LinearProgram* program) {
  for (size_t si = 0; si < c.ps.size(); ++si) {
    const int s = c.ps[si];
    int workers = 0;
    for (const PairCandidates& pc : c.pairs) workers += pc.ps_index == static_cast<int>(si);
    if (workers <= max_fan_in) continue;
    const int cover = (workers + max_fan_in - 1) / max_fan_in;
    std::vector<int> ps_cols;
    std::vector<double> ps_coef;
    std::map<int, std::pair<std::vector<int>, std::vector<double>>> per_switch;
    for (size_t i = 0; i < cols.r.size(); ++i) {
      const PairCandidates& pc = c.pairs[cols.members[i][0]];
      if (pc.ps_index != static_cast<int>(si)) continue;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        const int agg = pc.options[o].agg;
        for (int col : cols.r[i][o]) {
          if (agg == s) {
            ps_cols.push_back(col);
            ps_coef.push_back(1);
          } else {
            per_switch[agg].first.push_back(col);
            per_switch[agg].second.push_back(1);
          }
        }
      }
    }
    for (const auto& [key, ys] : cols.y) {
      if (key.second != s) continue;
      auto& [row_cols, row_coef] = per_switch[key.first];
      for (int y : ys) {
        row_cols.push_back(y);
        row_coef.push_back(-max_fan_in);
        ps_cols.push_back(y);
        ps_coef.push_back(1);
      }
    }
    for (const auto& [agg, row] : per_switch) {
      program->AddRow(-lp::kInfinity, 0, row.first, row.second);
    }
    ps_cols.push_back(free_shares ? cols.z[si] : lambda);
    ps_coef.push_back(free_shares ? -cover : -cover * c.shares[si]);
    program->AddRow(0, lp::kInfinity, ps_cols, ps_coef);
  }
}

}  // namespace

JobCandidates BuildCandidates(const Network& net, PathCache& paths, int job,
                              const std::vector<int>& ps, const std::vector<double>& shares,
                              int extra_candidates, bool spread) {
  const core::Graph& g = net.graph();
  auto path_list = [&](int from, int to) -> const std::vector<Path>& {
    return spread ? paths.GetDiverse(from, to) : paths.Get(from, to);
  };
  JobCandidates c;
  c.job = job;
  c.ps = ps;
  c.shares = shares;
  c.spread = spread;
  std::vector<int> ina;
  for (int v = 0; v < g.num_switches(); ++v) {
    if (g.ina_capable(v)) ina.push_back(v);
  }
  // The aggregation switches of a single-homed worker depend on its ToR only (its paths are its
  // ToR's behind its one link): computed once per (ToR, PS).
  std::map<std::pair<int, int>, std::pair<std::vector<int>, int>> aggs_of_tor;  // (aggs, detours)
  for (int w : WorkerNodes(net, job)) {
    for (int si = 0; si < static_cast<int>(ps.size()); ++si) {
      int s = ps[si];
      if (w == s) {
        c.local.emplace_back(w, si);
        continue;
      }
      const std::vector<Path>& direct = path_list(w, s);
      if (direct.empty()) continue;
      PairCandidates pc;
      pc.worker = w;
      pc.ps_index = si;
      pc.options.push_back(AggregationOption{s, direct});
      const bool single_homed = g.is_host(w) && g.out_arcs(w).size() == 1;
      const std::pair<int, int> key{single_homed ? g.arc(g.out_arcs(w)[0]).to : -1, s};
      auto cached = single_homed ? aggs_of_tor.find(key) : aggs_of_tor.end();
      std::vector<int> aggs;  // on-path switches, then `detours` detours
      int detours = 0;
      if (cached != aggs_of_tor.end()) {
        aggs = cached->second.first;
        detours = cached->second.second;
      } else {
        for (const Path& p : direct) {
          for (size_t i = 1; i + 1 < p.nodes.size(); ++i) {
            int v = p.nodes[i];
            if (g.ina_capable(v) && std::find(aggs.begin(), aggs.end(), v) == aggs.end()) {
              aggs.push_back(v);
            }
          }
        }
        if (extra_candidates > 0) {
          std::vector<std::pair<int, int>> detour;
          for (int a : ina) {
            if (std::find(aggs.begin(), aggs.end(), a) != aggs.end()) continue;
            int d1 = HopsBetween(paths, g, a, w);  // links are full duplex: symmetric hops
            int d2 = HopsBetween(paths, g, a, s);
            if (d1 < 0 || d2 < 0) continue;
            detour.emplace_back(d1 + d2, a);
          }
          int take = std::min<int>(extra_candidates, static_cast<int>(detour.size()));
          if (spread) {
            // Equal detours in the (ToR, PS)'s own order (PairOrder), not by node id.
            const int tor = single_homed ? key.first : w;
            std::partial_sort(detour.begin(), detour.begin() + take, detour.end(),
                              [&](const auto& x, const auto& y) {
                                if (x.first != y.first) return x.first < y.first;
                                return PairOrder(tor, s, x.second) < PairOrder(tor, s, y.second);
                              });
          } else {
            std::partial_sort(detour.begin(), detour.begin() + take, detour.end());
          }
          for (int i = 0; i < take; ++i) aggs.push_back(detour[i].second);
          detours = take;
        }
        if (single_homed) aggs_of_tor.emplace(key, std::make_pair(aggs, detours));
      }
      for (size_t i = 0; i < aggs.size(); ++i) {
        const int a = aggs[i];
        const std::vector<Path>& to_a = path_list(w, a);
        const std::vector<Path>& to_s = path_list(a, s);
        if (to_a.empty() || to_s.empty()) continue;
        const int first_detour = static_cast<int>(aggs.size()) - detours;
        const int rank =
            static_cast<int>(i) >= first_detour ? static_cast<int>(i) - first_detour : -1;
        pc.options.push_back(AggregationOption{a, to_a, rank});
        c.streams.emplace(std::make_pair(a, s), to_s);
      }
      c.pairs.push_back(std::move(pc));
    }
  }
  return c;
}

void AddPlanToCandidates(const Network& net, const RoutedJob& plan, JobCandidates* c) {
  const core::Graph& g = net.graph();
  std::map<std::pair<int, int>, int> pair_index;
  for (size_t i = 0; i < c->pairs.size(); ++i) {
    pair_index[{c->pairs[i].worker, c->ps[c->pairs[i].ps_index]}] = static_cast<int>(i);
  }
  for (const RoutedFlow& f : plan.flows) {
    auto it = pair_index.find({f.worker, f.ps});
    if (it == pair_index.end() || f.arcs.empty()) continue;
    PairCandidates& pc = c->pairs[it->second];
    AggregationOption* opt = nullptr;
    for (AggregationOption& o : pc.options) {
      if (o.agg == f.agg) opt = &o;
    }
    if (opt == nullptr) {
      pc.options.push_back(AggregationOption{f.agg, {}});
      opt = &pc.options.back();
    }
    opt->detour = -1;  // the plan's route stays a candidate (TrimDetours)
    AddPathIfNew(&opt->paths, PathFromArcs(g, f.worker, f.arcs));
  }
  for (const RoutedStream& st : plan.streams) {
    if (std::find(c->ps.begin(), c->ps.end(), st.ps) == c->ps.end()) continue;
    AddPathIfNew(&c->streams[{st.sw, st.ps}], PathFromArcs(g, st.sw, st.arcs));
  }
}

void GroupInterchangeablePairs(const Network& net, JobCandidates* c) {
  const core::Graph& g = net.graph();
  c->groups.clear();
  // Workers eligible for a group: single-homed hosts, not a PS of the job, one pair per PS.
  std::map<int, int> pairs_of;
  for (const PairCandidates& pc : c->pairs) ++pairs_of[pc.worker];
  auto sole_arc = [&](int w) {
    return g.is_host(w) && g.out_arcs(w).size() == 1 ? g.out_arcs(w)[0] : -1;
  };
  std::map<std::pair<int, int>, int> group_of;  // (ToR, PS index) -> index into c->groups
  for (size_t i = 0; i < c->pairs.size(); ++i) {
    const PairCandidates& pc = c->pairs[i];
    const int arc = sole_arc(pc.worker);
    bool eligible = arc >= 0 && pairs_of[pc.worker] == static_cast<int>(c->ps.size()) &&
                    std::find(c->ps.begin(), c->ps.end(), pc.worker) == c->ps.end();
    for (const AggregationOption& o : pc.options) {
      for (const Path& p : o.paths) eligible = eligible && !p.arcs.empty() && p.arcs[0] == arc;
    }
    if (!eligible) {
      c->groups.push_back({static_cast<int>(i)});
      continue;
    }
    auto [it, added] = group_of.emplace(std::make_pair(g.arc(arc).to, pc.ps_index),
                                        static_cast<int>(c->groups.size()));
    if (added) c->groups.emplace_back();
    c->groups[it->second].push_back(static_cast<int>(i));
  }
  // Equal options within a group: the union of the members' (switch, path after the first arc).
  for (const std::vector<int>& members : c->groups) {
    if (members.size() < 2) continue;
    std::vector<int> aggs;
    std::vector<int> detour;                              // per agg: -1 if any member's is
    std::vector<std::vector<std::vector<int>>> suffixes;  // per agg: arcs after the first
    for (int i : members) {
      for (const AggregationOption& o : c->pairs[i].options) {
        size_t k = std::find(aggs.begin(), aggs.end(), o.agg) - aggs.begin();
        if (k == aggs.size()) {
          aggs.push_back(o.agg);
          detour.push_back(o.detour);
          suffixes.emplace_back();
        } else if (o.detour < 0 || detour[k] < 0) {
          detour[k] = -1;
        } else {
          detour[k] = std::min(detour[k], o.detour);
        }
        for (const Path& p : o.paths) {
          std::vector<int> rest(p.arcs.begin() + 1, p.arcs.end());
          if (std::find(suffixes[k].begin(), suffixes[k].end(), rest) == suffixes[k].end()) {
            suffixes[k].push_back(std::move(rest));
          }
        }
      }
    }
    for (int i : members) {
      PairCandidates& pc = c->pairs[i];
      const int arc = sole_arc(pc.worker);
      pc.options.clear();
      for (size_t k = 0; k < aggs.size(); ++k) {
        AggregationOption o{aggs[k], {}, detour[k]};
        for (const std::vector<int>& rest : suffixes[k]) {
          std::vector<int> arcs{arc};
          arcs.insert(arcs.end(), rest.begin(), rest.end());
          o.paths.push_back(PathFromArcs(g, pc.worker, arcs));
        }
        pc.options.push_back(std::move(o));
      }
    }
  }
}

RoutedJob ToRoutedJob(const Network& net, const JobCandidates& c, const Choice& choice) {
  RoutedJob rj;
  rj.job = c.job;
  rj.batch_size = net.input().jobs[c.job].spec.batch_size;
  double total = 0;
  for (double x : c.shares) total += x > 1e-12 ? x : 0;
  for (size_t si = 0; si < c.ps.size(); ++si) {
    if (c.shares[si] > 1e-12) rj.shares.emplace_back(c.ps[si], c.shares[si] / total);
  }
  std::set<std::pair<int, int>> used;
  for (size_t i = 0; i < c.pairs.size(); ++i) {
    const PairCandidates& pc = c.pairs[i];
    if (c.shares[pc.ps_index] <= 1e-12) continue;
    const auto& [o, p] = choice.pair[i];
    const AggregationOption& opt = pc.options[o];
    int s = c.ps[pc.ps_index];
    rj.flows.push_back(RoutedFlow{pc.worker, s, opt.agg, 1.0, opt.paths[p].arcs});
    if (opt.agg != s) used.insert({opt.agg, s});
  }
  for (const auto& [w, si] : c.local) {
    if (c.shares[si] > 1e-12) rj.flows.push_back(RoutedFlow{w, c.ps[si], c.ps[si], 1.0, {}});
  }
  for (const auto& key : used) {
    auto it = choice.stream.find(key);
    int q = it == choice.stream.end() ? 0 : it->second;
    rj.streams.push_back(RoutedStream{key.first, key.second, c.streams.at(key)[q].arcs});
  }
  return rj;
}

int64_t CountLpColumns(const JobCandidates& c) {
  int64_t n = 1 + static_cast<int64_t>(c.ps.size());
  auto add_options = [&](const PairCandidates& p) {
    for (const AggregationOption& o : p.options) n += static_cast<int64_t>(o.paths.size());
  };
  if (c.groups.empty()) {
    for (const PairCandidates& p : c.pairs) add_options(p);
  } else {
    for (const std::vector<int>& group : c.groups) add_options(c.pairs[group[0]]);
  }
  for (const auto& [key, paths] : c.streams) {
    n += static_cast<int64_t>(paths.size()) + (c.groups.empty() ? 0 : 1);
  }
  return n;
}

int TrimDetours(int64_t max_columns, JobCandidates* c) {
  // Per stream: the least rank that needs it (-1: a kept option; absent: no option, kept).
  std::map<std::pair<int, int>, int> need;
  int ranks = 0;
  for (const PairCandidates& pc : c->pairs) {
    for (const AggregationOption& o : pc.options) {
      ranks = std::max(ranks, o.detour + 1);
      auto key = std::make_pair(o.agg, c->ps[pc.ps_index]);
      auto [it, added] = need.emplace(key, o.detour);
      if (!added)
        it->second = (it->second < 0 || o.detour < 0) ? -1 : std::min(it->second, o.detour);
    }
  }
  // Columns with ranks [0, keep) kept, for every keep (one pass, then a suffix sum).
  std::vector<int64_t> of_rank(ranks, 0);
  int64_t fixed = 1 + static_cast<int64_t>(c->ps.size());
  auto count_options = [&](const PairCandidates& pc) {
    for (const AggregationOption& o : pc.options) {
      (o.detour < 0 ? fixed : of_rank[o.detour]) += static_cast<int64_t>(o.paths.size());
    }
  };
  if (c->groups.empty()) {
    for (const PairCandidates& pc : c->pairs) count_options(pc);
  } else {
    for (const std::vector<int>& group : c->groups) count_options(c->pairs[group[0]]);
  }
  for (const auto& [key, paths] : c->streams) {
    auto it = need.find(key);
    const int64_t n = static_cast<int64_t>(paths.size()) + (c->groups.empty() ? 0 : 1);
    (it == need.end() || it->second < 0 ? fixed : of_rank[it->second]) += n;
  }
  int keep = ranks;
  int64_t total = fixed;
  for (int r = 0; r < ranks; ++r) total += of_rank[r];
  while (keep > 0 && total > max_columns) total -= of_rank[--keep];
  if (keep == ranks) return keep;
  for (PairCandidates& pc : c->pairs) {
    std::erase_if(pc.options, [keep](const AggregationOption& o) { return o.detour >= keep; });
  }
  for (const auto& [key, rank] : need) {
    if (rank >= keep) c->streams.erase(key);
  }
  return keep;
}

RoutingLp BuildRoutingLp(const Network& net, const std::vector<double>& residual,
                         const std::vector<JobCandidates>& jobs, bool free_shares, int max_fan_in) {
  RoutingLp lp;
  lp.program.SetMaximize(true);
  const bool multi = jobs.size() > 1;
  if (multi) lp.t = lp.program.AddColumn(0, lp::kInfinity, 1);
  std::vector<std::vector<int>> resource_cols(net.num_resources());
  std::vector<std::vector<double>> resource_coef(net.num_resources());
  auto charge = [&](int r, int col, double coef) {
    resource_cols[r].push_back(col);
    resource_coef[r].push_back(coef);
  };
  lp.jobs.resize(jobs.size());
  // Workers of several jobs: their access rows must see every job's load (below).
  std::map<int, int> jobs_of_worker;
  for (const JobCandidates& c : jobs) {
    std::set<int> workers;
    for (const PairCandidates& pc : c.pairs) workers.insert(pc.worker);
    for (int w : workers) ++jobs_of_worker[w];
  }
  for (size_t j = 0; j < jobs.size(); ++j) {
    const JobCandidates& c = jobs[j];
    RoutingLp::JobColumns& cols = lp.jobs[j];
    int lambda = lp.program.AddColumn(0, lp::kInfinity, multi ? 1e-6 : 1);
    lp.lambda.push_back(lambda);
    if (free_shares) {
      std::vector<int> zc;
      std::vector<double> coef;
      for (size_t si = 0; si < c.ps.size(); ++si) {
        cols.z.push_back(lp.program.AddColumn(0, lp::kInfinity, 0));
        zc.push_back(cols.z.back());
        coef.push_back(1);
      }
      zc.push_back(lambda);
      coef.push_back(-1);
      lp.program.AddRow(0, 0, zc, coef);
    }
    for (const auto& [key, paths] : c.streams) {
      std::vector<int>& ys = cols.y[key];
      for (const Path& p : paths) {
        int col = lp.program.AddColumn(0, lp::kInfinity, 0);
        ys.push_back(col);
        lp.load_cost.resize(col + 1, 0.0);
        lp.load_cost[col] = p.hops();
        for (int a : p.arcs) charge(net.ArcResource(a), col, 1);
        charge(net.NodeResource(key.second), col, 1);
      }
    }
    // Grouped jobs: each stream's total Y = Σ_q y_q as a column of its own (one row), so that the
    // coupling rows of the many workers a switch may aggregate hold one stream column, not k:
    // the same LP, far fewer non-zeros in the dense stream columns.
    std::map<std::pair<int, int>, int> stream_total;
    for (const auto& [key, ys] : cols.y) {
      if (c.groups.empty()) break;
      const int total = lp.program.AddColumn(0, lp::kInfinity, 0);
      lp.load_cost.resize(total + 1, 0.0);
      stream_total[key] = total;
      std::vector<int> row_cols(ys.begin(), ys.end());
      std::vector<double> row_coef(ys.size(), 1.0);
      row_cols.push_back(total);
      row_coef.push_back(-1);
      lp.program.AddRow(0, 0, row_cols, row_coef);
    }
    if (c.groups.empty()) {
      for (size_t i = 0; i < c.pairs.size(); ++i) cols.members.push_back({static_cast<int>(i)});
    } else {
      cols.members = c.groups;
    }
    cols.r.resize(cols.members.size());
    for (size_t i = 0; i < cols.members.size(); ++i) {
      const std::vector<int>& members = cols.members[i];
      const PairCandidates& pc = c.pairs[members[0]];
      const double m = static_cast<double>(members.size());
      // A group's access links (each member's first arc carries λ whatever the routing) see the
      // group's total rate divided by m: only the row of the member with the least residual
      // (the others are the same row with more room) unless a member also works for another job
      // of this LP, whose load its row must add (then every member's row).
      std::vector<int> access;
      if (members.size() > 1) {
        bool shared = false;
        for (int k : members) {
          access.push_back(net.ArcResource(c.pairs[k].options[0].paths[0].arcs[0]));
          shared = shared || jobs_of_worker[c.pairs[k].worker] > 1;
        }
        if (!shared) {
          const int least = *std::min_element(access.begin(), access.end(), [&](int a, int b) {
            return residual[a] < residual[b];
          });
          access = {least};
        }
      }
      int s = c.ps[pc.ps_index];
      std::vector<int> demand;
      std::vector<double> ones;
      cols.r[i].resize(pc.options.size());
      for (size_t o = 0; o < pc.options.size(); ++o) {
        const AggregationOption& opt = pc.options[o];
        std::vector<int> coupling;
        std::vector<double> coupling_coef;
        for (const Path& p : opt.paths) {
          int col = lp.program.AddColumn(0, lp::kInfinity, 0);
          cols.r[i][o].push_back(col);
          lp.load_cost.resize(col + 1, 0.0);
          lp.load_cost[col] = p.hops();
          demand.push_back(col);
          ones.push_back(1);
          coupling.push_back(col);
          coupling_coef.push_back(1);
          for (size_t k = 0; k < p.arcs.size(); ++k) {
            if (k == 0 && !access.empty()) {
              for (int r : access) charge(r, col, 1 / m);
            } else {
              charge(net.ArcResource(p.arcs[k]), col, 1);
            }
          }
          charge(net.NodeResource(opt.agg), col, 1);
        }
        if (opt.agg != s) {
          auto total = stream_total.find({opt.agg, s});
          auto it = cols.y.find({opt.agg, s});
          if (total != stream_total.end()) {
            coupling.push_back(total->second);
            coupling_coef.push_back(-m);
          } else if (it != cols.y.end()) {
            for (int y : it->second) {
              coupling.push_back(y);
              coupling_coef.push_back(-m);
            }
          }
          lp.program.AddRow(-lp::kInfinity, 0, coupling, coupling_coef);
        }
      }
      if (free_shares) {
        demand.push_back(cols.z[pc.ps_index]);
      } else {
        demand.push_back(lambda);
      }
      ones.push_back(free_shares ? -m : -m * c.shares[pc.ps_index]);
      lp.program.AddRow(0, 0, demand, ones);
    }
    if (max_fan_in > 0) AddFanInCuts(c, cols, lambda, free_shares, max_fan_in, &lp.program);
  }
  for (int r = 0; r < net.num_resources(); ++r) {
    if (resource_cols[r].empty()) continue;
    lp.program.AddRow(-lp::kInfinity, residual[r], resource_cols[r], resource_coef[r]);
  }
  if (multi) {
    for (int lambda : lp.lambda) lp.program.AddRow(0, lp::kInfinity, {lambda, lp.t}, {1, -1});
  } else if (!jobs.empty()) {
    const core::Graph& g = net.graph();
    std::set<int> workers;
    for (const PairCandidates& pc : jobs[0].pairs) workers.insert(pc.worker);
    for (int w : workers) {
      if (std::find(jobs[0].ps.begin(), jobs[0].ps.end(), w) != jobs[0].ps.end()) continue;
      double egress = 0;
      for (int a : g.out_arcs(w)) egress += std::max(0.0, residual[net.ArcResource(a)]);
      lp.egress_bound = std::min(lp.egress_bound, egress);
    }
  }
  return lp;
}

absl::StatusOr<LpOutcome> SolveRoutingLp(const RoutingLp& lp,
                                         const std::vector<JobCandidates>& jobs, bool free_shares,
                                         double time_limit_s, const lp::WarmStart& warm,
                                         lp::Simplex simplex) {
  auto solved =
      lp::SolveLpThenMinimize(lp.program, lp.load_cost, 1e-7, time_limit_s, warm, simplex);
  if (!solved.ok()) return solved.status();
  LpOutcome out;
  out.solution = std::move(solved->first);
  if (jobs.size() == 1) {
    if (out.solution.status == lp::SolveStatus::kOptimal) {
      out.bound = std::max(0.0, out.solution.values[lp.lambda[0]]);
      out.bound_source = "lp_optimum";
    } else {
      const double dual = out.solution.best_bound.value_or(lp::kInfinity);
      const double b = std::min(dual, lp.egress_bound);
      if (b < lp::kInfinity) out.bound = std::max(0.0, b);
      out.bound_source = b >= lp::kInfinity ? "none" : dual <= b ? "dual_bound" : "egress_bound";
    }
  }
  if (out.solution.status == lp::SolveStatus::kOptimal) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      out.lambda.push_back(std::max(0.0, out.solution.values[lp.lambda[j]]));
    }
    if (!solved->second_values.empty()) out.solution.values = std::move(solved->second_values);
    out.shares.resize(jobs.size());
    if (free_shares) {
      for (size_t j = 0; j < jobs.size(); ++j) {
        double lambda = std::max(0.0, out.solution.values[lp.lambda[j]]);
        for (int z : lp.jobs[j].z) {
          double v = std::max(0.0, out.solution.values[z]);
          out.shares[j].push_back(lambda > 0 ? v / lambda : 0);
        }
      }
    }
    return out;
  }
  out.lambda.assign(jobs.size(), 0.0);
  out.shares.resize(jobs.size());
  if (out.solution.values.empty()) return out;
  for (size_t j = 0; j < jobs.size(); ++j) {
    out.lambda[j] = std::max(0.0, out.solution.values[lp.lambda[j]]);
    if (free_shares) {
      for (int z : lp.jobs[j].z) {
        double v = std::max(0.0, out.solution.values[z]);
        out.shares[j].push_back(out.lambda[j] > 0 ? v / out.lambda[j] : 0);
      }
    }
  }
  return out;
}

}  // namespace inac::scheduler
