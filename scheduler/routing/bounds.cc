#include "scheduler/routing/bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/lp/linear_program.h"

namespace inac::scheduler {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where a group of the job's workers enters the network: a ToR (a group of single-homed workers)
// or a worker host of its own.
struct Source {
  int node = -1;
  int worker = -1;  // the worker's host for a source of its own; -1 for a ToR group
  int members = 0;
};

// Everything the LP needs to know about the instance, before any column exists.
struct Instance {
  std::vector<int> ps;                           // PS nodes (distinct, spec order)
  std::vector<int> coverage;                     // per PS: ⌈W_s / 64^L⌉ (0 when W_s = 0)
  std::vector<Source> sources;                   // groups first in ToR order, then own sources
  std::vector<int> aggregators;                  // A: INA switches with residual processing > 0
  std::vector<int> commodities;                  // destinations: A, then the PSs
  std::vector<std::vector<int>> commodity_arcs;  // per commodity
  std::vector<std::vector<char>> source_host;    // per commodity, per node: a source host of it
  double access_bound = kInf;  // λ ≤ the grouped workers' smallest access residual
  double closed_form = kInf;   // access, own sources' egress, PS ingress over coverage
};

bool HasPair(const Source& src, int ps) { return src.worker != ps; }

absl::StatusOr<Instance> Prepare(const Network& net, int job, const std::vector<double>& res,
                                 bool chains) {
  const core::Graph& g = net.graph();
  const auto& jobs = net.input().jobs;
  if (job < 0 || job >= static_cast<int>(jobs.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no job with index ", job));
  }
  const core::JobSpec& spec = jobs[job].spec;
  if (spec.parameter_servers.empty() || spec.allreduce == core::AllReduce::kRing) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", jobs[job].id, " uses ring all-reduce; the bounds are for PS jobs"));
  }
  if (spec.workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", jobs[job].id, " has no workers"));
  }
  if (static_cast<int>(res.size()) != net.num_resources()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "residual has ", res.size(), " entries, the network ", net.num_resources(), " resources"));
  }
  auto host_index = [&](const std::string& id) -> absl::StatusOr<int> {
    const int v = g.index(id);
    if (v < 0 || !g.is_host(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", jobs[job].id, " names unknown host \"", id, "\""));
    }
    return v;
  };
  Instance in;
  std::set<int> seen;
  for (const std::string& id : spec.parameter_servers) {
    auto v = host_index(id);
    if (!v.ok()) return v.status();
    if (seen.insert(*v).second) in.ps.push_back(*v);
  }
  std::vector<int> workers;
  seen.clear();
  for (const std::string& id : spec.workers) {
    auto v = host_index(id);
    if (!v.ok()) return v.status();
    if (seen.insert(*v).second) workers.push_back(*v);
  }
  const std::set<int> ps_set(in.ps.begin(), in.ps.end());
  double scale = 1;  // 64^L
  for (int l = 0; l < (chains ? kBoundChainLevels : 1); ++l) scale *= kBoundMaxFanIn;
  for (int s : in.ps) {
    const int64_t w = static_cast<int64_t>(workers.size()) - (seen.count(s) ? 1 : 0);
    in.coverage.push_back(w == 0 ? 0 : static_cast<int>(std::ceil(static_cast<double>(w) / scale)));
  }
  // Sources: single-homed workers (one up link, to a switch) that are not PSs, grouped per ToR.
  std::map<int, int> group_of_tor;
  std::vector<int> own;
  for (int w : workers) {
    const auto& out = g.out_arcs(w);
    if (out.size() == 1 && g.is_switch(g.arc(out[0]).to) && !ps_set.count(w)) {
      const int tor = g.arc(out[0]).to;
      auto [it, added] = group_of_tor.emplace(tor, static_cast<int>(in.sources.size()));
      if (added) in.sources.push_back(Source{tor, -1, 0});
      ++in.sources[it->second].members;
      in.access_bound = std::min(in.access_bound, res[net.ArcResource(out[0])]);
    } else {
      own.push_back(w);
    }
  }
  for (int w : own) in.sources.push_back(Source{w, w, 1});
  // Closed-form bound: access arcs; an own source that is not a PS sends λ over its out arcs;
  // PS s receives at least coverage_s · X_s, so X_s ≤ B_s / coverage_s and λ = Σ_s X_s.
  in.closed_form = in.access_bound;
  for (int w : own) {
    if (ps_set.count(w)) continue;
    double egress = 0;
    for (int a : g.out_arcs(w)) egress += res[net.ArcResource(a)];
    in.closed_form = std::min(in.closed_form, egress);
  }
  double ps_sum = 0;
  for (size_t i = 0; i < in.ps.size(); ++i) {
    ps_sum += in.coverage[i] == 0 ? kInf : res[net.NodeResource(in.ps[i])] / in.coverage[i];
  }
  in.closed_form = std::min(in.closed_form, ps_sum);

  for (int v = 0; v < g.num_switches(); ++v) {
    if (g.ina_capable(v) && res[net.NodeResource(v)] > 0) in.aggregators.push_back(v);
  }
  in.commodities = in.aggregators;
  in.commodities.insert(in.commodities.end(), in.ps.begin(), in.ps.end());
  const int n = g.num_nodes();
  for (size_t k = 0; k < in.commodities.size(); ++k) {
    const int dest = in.commodities[k];
    const bool is_ps = k >= in.aggregators.size();
    std::vector<char> src(n, 0);
    for (const Source& s : in.sources) {
      if (s.worker < 0) continue;
      // An own source feeds an aggregation commodity when it has a pair toward some PS, and
      // PS s's commodity when it is not s.
      bool feeds = false;
      if (is_ps) {
        feeds = s.worker != dest;
      } else {
        for (int p : in.ps) feeds = feeds || HasPair(s, p);
      }
      if (feeds) src[s.worker] = 1;
    }
    std::vector<int> arcs;
    for (int u = 0; u < n; ++u) {
      if (u == dest) continue;
      if (g.is_host(u) && !src[u]) continue;
      for (int e : g.out_arcs(u)) {
        const int v = g.arc(e).to;
        if (g.is_host(v) && v != dest) continue;
        if (!(res[net.ArcResource(e)] > 0)) continue;
        arcs.push_back(e);
      }
    }
    in.commodity_arcs.push_back(std::move(arcs));
    in.source_host.push_back(std::move(src));
  }
  return in;
}

// Builds (program != nullptr) or only counts the LP. Returns the λ column.
struct Built {
  int lambda = -1;
  int64_t columns = 0;
  int64_t rows = 0;
};

Built BuildLp(const Network& net, const Instance& in, const std::vector<double>& res, bool chains,
              lp::LinearProgram* program) {
  const core::Graph& g = net.graph();
  Built out;
  auto col = [&](double lo, double hi, double obj) -> int {
    ++out.columns;
    return program ? program->AddColumn(lo, hi, obj) : static_cast<int>(out.columns - 1);
  };
  // Rows are collected as entry lists, then added.
  struct Row {
    double lo, hi;
    std::vector<int> cols;
    std::vector<double> coefs;
  };
  std::vector<Row> rows;
  auto new_row = [&](double lo, double hi) {
    ++out.rows;
    if (!program) return -1;
    rows.push_back(Row{lo, hi, {}, {}});
    return static_cast<int>(rows.size()) - 1;
  };
  auto add = [&](int row, int column, double coef) {
    if (!program || row < 0) return;
    rows[row].cols.push_back(column);
    rows[row].coefs.push_back(coef);
  };

  const int P = static_cast<int>(in.ps.size());
  const int A = static_cast<int>(in.aggregators.size());
  const int K = static_cast<int>(in.commodities.size());
  const int n = g.num_nodes();

  out.lambda = col(0, in.access_bound, 1);
  // Share volumes X_s (one PS: λ itself).
  std::vector<int> X(P, out.lambda);
  if (P > 1) {
    const int shares = new_row(0, 0);
    add(shares, out.lambda, -1);
    for (int s = 0; s < P; ++s) {
      X[s] = col(0, lp::kInfinity, 0);
      add(shares, X[s], 1);
    }
  }
  // Conservation rows per (commodity, node other than its destination): switches and the
  // commodity's source hosts. out − in − supply = 0.
  std::vector<std::vector<int>> cons(K, std::vector<int>(program ? n : 0, -1));
  for (int k = 0; k < K; ++k) {
    for (int v = 0; v < n; ++v) {
      if (v == in.commodities[k]) continue;
      if (g.is_host(v) && !in.source_host[k][v]) continue;
      const int r = new_row(0, 0);
      if (program) cons[k][v] = r;
    }
  }
  auto supply = [&](int k, int node, int column) {
    if (!program || node == in.commodities[k]) return;  // at the destination: no network use
    add(cons[k][node], column, -1);
  };
  // Per aggregation switch: processing, and per PS: coupling, fan-in, y ≤ X, stream balance.
  std::vector<int> processing(A, -1);
  std::vector<std::vector<int>> y(A, std::vector<int>(P, -1)), fan_in = y, balance = y;
  std::vector<std::vector<int>> t = y;  // stream part to the PS (single level: y itself)
  std::vector<int> ingress(P), coverage(P);
  for (int s = 0; s < P; ++s) {
    ingress[s] = new_row(-lp::kInfinity, res[net.NodeResource(in.ps[s])]);
    coverage[s] = new_row(0, lp::kInfinity);
    add(coverage[s], X[s], -in.coverage[s]);
  }
  for (int a = 0; a < A; ++a) {
    processing[a] = new_row(-lp::kInfinity, res[net.NodeResource(in.aggregators[a])]);
    for (int s = 0; s < P; ++s) {
      y[a][s] = col(0, lp::kInfinity, 0);
      fan_in[a][s] = new_row(-lp::kInfinity, 0);
      add(fan_in[a][s], y[a][s], -kBoundMaxFanIn);
      const int cap = new_row(-lp::kInfinity, 0);
      add(cap, y[a][s], 1);
      add(cap, X[s], -1);
      if (chains) {
        t[a][s] = col(0, lp::kInfinity, 0);
        balance[a][s] = new_row(0, 0);
        add(balance[a][s], y[a][s], 1);
        add(balance[a][s], t[a][s], -1);
      } else {
        t[a][s] = y[a][s];
      }
      const int ps_commodity = A + s;
      supply(ps_commodity, in.aggregators[a], t[a][s]);
      add(ingress[s], t[a][s], 1);
      add(coverage[s], t[a][s], 1);
    }
  }
  // Worker (group) columns.
  for (const Source& src : in.sources) {
    for (int s = 0; s < P; ++s) {
      if (!HasPair(src, in.ps[s])) continue;
      const int demand = new_row(0, 0);
      add(demand, X[s], -src.members);
      for (int a = 0; a < A; ++a) {
        const int r = col(0, lp::kInfinity, 0);
        add(demand, r, 1);
        const int coupling = new_row(-lp::kInfinity, 0);
        add(coupling, r, 1);
        add(coupling, y[a][s], -src.members);
        add(fan_in[a][s], r, 1);
        add(processing[a], r, 1);
        supply(a, src.node, r);
      }
      const int raw = col(0, lp::kInfinity, 0);
      add(demand, raw, 1);
      add(ingress[s], raw, 1);
      add(coverage[s], raw, 1);
      supply(A + s, src.node, raw);
    }
  }
  // Chains: z_{c,p,s}.
  if (chains) {
    for (int c = 0; c < A; ++c) {
      for (int p = 0; p < A; ++p) {
        if (c == p) continue;
        for (int s = 0; s < P; ++s) {
          const int z = col(0, lp::kInfinity, 0);
          add(balance[c][s], z, -1);
          const int within = new_row(-lp::kInfinity, 0);
          add(within, z, 1);
          add(within, y[p][s], -1);
          add(fan_in[p][s], z, 1);
          add(processing[p], z, 1);
          supply(p, in.aggregators[c], z);
        }
      }
    }
  }
  // Flows and arc capacities.
  std::vector<int> capacity(program ? net.num_arcs() : 0, -1);
  std::vector<char> counted(net.num_arcs(), 0);
  for (int k = 0; k < K; ++k) {
    for (int e : in.commodity_arcs[k]) {
      if (!counted[e]) {
        counted[e] = 1;
        const int r = new_row(-lp::kInfinity, res[net.ArcResource(e)]);
        if (program) capacity[e] = r;
      }
      const int f = col(0, lp::kInfinity, 0);
      if (!program) continue;
      add(capacity[e], f, 1);
      const core::Graph::Arc& arc = g.arc(e);
      if (cons[k][arc.from] >= 0) add(cons[k][arc.from], f, 1);
      if (cons[k][arc.to] >= 0) add(cons[k][arc.to], f, -1);
    }
  }
  if (program) {
    for (const Row& r : rows) program->AddRow(r.lo, r.hi, r.cols, r.coefs);
    program->SetMaximize(true);
  }
  return out;
}

absl::StatusOr<RateBound> Bound(const Network& net, int job, const std::vector<double>* residual,
                                double time_limit_s, bool chains) {
  const std::vector<double>& res = residual ? *residual : net.residuals();
  auto in = Prepare(net, job, res, chains);
  if (!in.ok()) return in.status();
  const Built size = BuildLp(net, *in, res, chains, nullptr);
  RateBound out;
  out.columns = static_cast<int>(std::min<int64_t>(size.columns, INT32_MAX));
  out.rows = static_cast<int>(std::min<int64_t>(size.rows, INT32_MAX));
  if (size.columns > kMaxBoundColumns) {
    out.gbps = in->closed_form;
    out.status = "too_large: closed_form";
    return out;
  }
  lp::LinearProgram program;
  const Built built = BuildLp(net, *in, res, chains, &program);
  auto solution = lp::SolveLp(program, time_limit_s);
  if (!solution.ok()) return solution.status();
  out.status = lp::SolveStatusName(solution->status);
  if (solution->status == lp::SolveStatus::kOptimal) {
    out.gbps = solution->values[built.lambda];
  } else if (solution->status == lp::SolveStatus::kUnbounded) {
    out.gbps = kInf;
  } else {
    const double dual = solution->best_bound.value_or(kInf);
    out.gbps = std::min(dual, in->closed_form);
    absl::StrAppend(&out.status, dual <= in->closed_form ? ": dual_bound" : ": closed_form");
  }
  return out;
}

}  // namespace

absl::StatusOr<RateBound> SingleLevelBound(const Network& network, int job,
                                           const std::vector<double>* residual,
                                           double time_limit_s) {
  return Bound(network, job, residual, time_limit_s, /*chains=*/false);
}

absl::StatusOr<RateBound> ChainedBound(const Network& network, int job,
                                       const std::vector<double>* residual, double time_limit_s) {
  return Bound(network, job, residual, time_limit_s, /*chains=*/true);
}

absl::StatusOr<BoundSize> RateBoundSize(const Network& network, int job, bool chains,
                                        const std::vector<double>* residual) {
  const std::vector<double>& res = residual ? *residual : network.residuals();
  auto in = Prepare(network, job, res, chains);
  if (!in.ok()) return in.status();
  const Built size = BuildLp(network, *in, res, chains, nullptr);
  return BoundSize{size.columns, size.rows};
}

}  // namespace inac::scheduler
