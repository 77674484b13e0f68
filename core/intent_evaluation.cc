#include "core/intent_evaluation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace inac::core {
namespace {

// The data plane's aggregator registers (AGG_SLOTS in api/p4/ina.p4).
constexpr int64_t kRegisterSlots = 32768;
constexpr uint32_t kMaxFanIn = 64;
constexpr double kBytesPerGbitUs = 125;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The tables of one switch, keyed as ina.p4 looks them up.
struct Tables {
  std::map<uint32_t, const JobAggregationIntent*> jobs;
  std::map<std::pair<uint32_t, uint32_t>, const AggregationInputIntent*> inputs;
  std::map<std::tuple<uint32_t, uint8_t, uint32_t, uint32_t>, const RouteIntent*> routes;
  // Per tag: its effective window (aggregators, sharing counted) and whether its window reaches
  // slots the switch does not have.
  std::map<uint32_t, double> effective_window;
  std::set<uint32_t> beyond_memory;
};

struct Packet {
  RouteClass cls = RouteClass::kRaw;
  bool fallback = false;
  uint32_t src = 0;
  uint32_t dst = 0;
};

// Where a traced packet ended.
struct TraceEnd {
  enum Kind { kPs, kInput, kLost } kind = kLost;
  int node = -1;          // the PS or the absorbing switch
  uint32_t index = 0;     // input index at the absorbing switch
  double latency_us = 0;  // from where the trace started
};

// One job's coefficients per unit of λ, private caps and problems.
struct JobLoad {
  std::map<int, double> coefficients;  // resource -> Gbps per unit of λ
  double cap = kInfinity;
  std::string cap_name;
  std::vector<std::string> problems;

  void Problem(std::string text) {
    if (std::find(problems.begin(), problems.end(), text) == problems.end()) {
      problems.push_back(std::move(text));
    }
  }
};

// Per aggregation switch of one tag.
struct AggState {
  std::set<uint32_t> bits;
  bool fallback = false;
  bool emitted = false;
  TraceEnd up;  // the first upstream unit's trace
};

class Evaluator {
 public:
  Evaluator(const Topology& topology, const Plan& plan, const IntentTimingOptions& timing)
      : topology_(topology), graph_(topology), plan_(plan), timing_(timing) {
    const int n = graph_.num_nodes();
    tables_.resize(graph_.num_switches());
    address_.resize(n);
    for (int v = 0; v < n; ++v) address_[v] = NodeAddress(topology, graph_.name(v));
    // Ports as core::PortOf numbers them (explicit a_port/b_port, else the 1-based position among
    // the switch's links in document order), in one pass; an up link wins a port over a down one.
    std::vector<uint32_t> seen(n, 0);
    const int links = static_cast<int>(topology.links.size());
    for (int l = 0; l < links; ++l) {
      const Link& link = topology.links[l];
      const int a = graph_.index(link.a), b = graph_.index(link.b);
      const uint32_t pa = ++seen[a];
      const uint32_t pb = a == b ? pa : ++seen[b];
      if (a == b) continue;
      const bool up = link.status == LinkStatus::kUp;
      auto add = [&](int sw, uint32_t port, int arc) {
        if (!graph_.is_switch(sw)) return;
        auto [it, inserted] = port_arc_.try_emplace({sw, port}, arc);
        if (!inserted && up && !IsUp(it->second)) it->second = arc;
      };
      add(a, link.a_port ? *link.a_port : pa, 2 * l);
      add(b, link.b_port ? *link.b_port : pb, 2 * l + 1);
    }
  }

  absl::Status Load(const std::vector<SwitchIntent>& intents) {
    std::vector<bool> loaded(graph_.num_switches(), false);
    for (const SwitchIntent& si : intents) {
      const int u = graph_.index(si.switch_id);
      if (u < 0 || !graph_.is_switch(u)) {
        return absl::InvalidArgumentError(
            absl::StrCat("intent for \"", si.switch_id, "\", not a switch of the topology"));
      }
      if (loaded[u]) {
        return absl::InvalidArgumentError(
            absl::StrCat("two intents for switch \"", si.switch_id, "\""));
      }
      loaded[u] = true;
      Tables& t = tables_[u];
      for (const JobAggregationIntent& j : si.jobs) t.jobs[j.tag] = &j;
      for (const AggregationInputIntent& in : si.inputs)
        t.inputs[{in.tag, in.source_address}] = &in;
      for (const RouteIntent& r : si.routes) {
        t.routes[{r.tag, static_cast<uint8_t>(r.packet_class), r.source_address,
                  r.destination_address}] = &r;
      }
      LayOutWindows(u, &t);
    }
    return absl::OkStatus();
  }

  std::vector<IntentJobRate> Run() {
    std::vector<const JobPlan*> jobs;
    for (const JobPlan& jp : plan_.jobs) {
      if (jp.ring.empty()) jobs.push_back(&jp);
    }
    std::vector<JobLoad> loads(jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) EvaluateJob(*jobs[j], &loads[j]);
    return Fill(jobs, loads);
  }

 private:
  bool IsUp(int arc) const { return topology_.links[arc / 2].status == LinkStatus::kUp; }
  int ArcHead(int arc) const { return graph_.arc(arc).to; }
  double ArcLatency(int arc) const {
    const Link& l = topology_.links[arc / 2];
    return l.latency_us ? *l.latency_us : timing_.default_link_latency_us;
  }

  // Resources: directed arcs [0, 2L), then per node its processing (switches) or ingress (hosts).
  int NodeResource(int node) const { return graph_.num_arcs() + node; }
  double Capacity(int r) const {
    if (r < graph_.num_arcs()) return IsUp(r) ? topology_.links[r / 2].gbps : 0.0;
    const int node = r - graph_.num_arcs();
    if (graph_.is_switch(node)) return topology_.switches[node].ina.processing_gbps;
    return graph_.host_ingress_gbps(node);
  }
  std::string ResourceName(int r) const {
    if (r < graph_.num_arcs()) {
      const auto& arc = graph_.arc(r);
      return absl::StrCat("link ", graph_.name(arc.from), "->", graph_.name(arc.to));
    }
    const int node = r - graph_.num_arcs();
    return absl::StrCat(graph_.is_switch(node) ? "processing " : "ingress ", graph_.name(node));
  }

  // The aggregators each tag's window covers on switch u, an aggregator covered by k windows
  // counting 1/k for each.
  void LayOutWindows(int u, Tables* t) {
    const Switch& sw = topology_.switches[u];
    const int64_t limit =
        std::min<int64_t>(kRegisterSlots, std::max<int64_t>(0, sw.ina.aggregators));
    // Events: (position, +1 open / -1 close, tag).
    std::vector<std::tuple<int64_t, int, uint32_t>> events;
    for (const auto& [tag, ji] : t->jobs) {
      t->effective_window[tag] = 0;
      const int64_t count = ji->aggregator_count, window = ji->window;
      if (count == 0 || window == 0) continue;
      const int64_t base = ji->aggregator_base;
      std::vector<std::pair<int64_t, int64_t>> spans;
      if (window >= count) {
        spans.push_back({base, base + count});
      } else {
        const int64_t start = ji->slot_offset % count;
        const int64_t end = start + window;
        if (end <= count) {
          spans.push_back({base + start, base + end});
        } else {
          spans.push_back({base + start, base + count});
          spans.push_back({base, base + end - count});
        }
      }
      for (auto [lo, hi] : spans) {
        if (hi > limit) t->beyond_memory.insert(tag);
        hi = std::min(hi, limit);
        if (lo >= hi) continue;
        events.push_back({lo, +1, tag});
        events.push_back({hi, -1, tag});
      }
    }
    std::sort(events.begin(), events.end());
    std::map<uint32_t, int> active;
    for (size_t e = 0; e < events.size();) {
      const int64_t at = std::get<0>(events[e]);
      while (e < events.size() && std::get<0>(events[e]) == at) {
        const uint32_t tag = std::get<2>(events[e]);
        if ((active[tag] += std::get<1>(events[e])) == 0) active.erase(tag);
        ++e;
      }
      if (e == events.size() || active.empty()) continue;
      const double share = static_cast<double>(std::get<0>(events[e]) - at) / active.size();
      for (const auto& [tag, n] : active) t->effective_window[tag] += share;
    }
  }

  // Follows `p` from node `u` (a switch that has just processed it when `at_origin`: it
  // aggregated or fell back there, so only its route applies), adding a unit to every arc it
  // crosses, until it reaches a host or is an input of an aggregation.
  TraceEnd Trace(uint32_t tag, int ps_node, Packet p, int u, bool at_origin, double latency_us,
                 std::map<int, double>* arc_units, JobLoad* load) {
    TraceEnd end;
    const char* cls = RouteClassName(p.cls);
    const std::string what = absl::StrCat("tag ", tag, ": ", cls, p.fallback ? " (fallback)" : "",
                                          " packet ", FormatIpv4(p.src), " -> ", FormatIpv4(p.dst));
    for (int hops = 0;; ++hops) {
      if (hops > graph_.num_nodes()) {
        load->Problem(absl::StrCat(what, " loops (through ", graph_.name(u), ")"));
        return end;
      }
      if (graph_.is_host(u)) {
        if (u == ps_node && address_[u] == p.dst) {
          end.kind = TraceEnd::kPs;
          end.node = u;
          end.latency_us = latency_us;
        } else {
          load->Problem(absl::StrCat(what, " reaches host ", graph_.name(u)));
        }
        return end;
      }
      const Tables& t = tables_[u];
      if (!at_origin && !p.fallback && p.cls != RouteClass::kResult) {
        auto job = t.jobs.find(tag);
        auto input = t.inputs.find({tag, p.src});
        if (job != t.jobs.end() && input != t.inputs.end()) {
          end.kind = TraceEnd::kInput;
          end.node = u;
          end.index = input->second->index;
          end.latency_us = latency_us;
          return end;
        }
      }
      at_origin = false;
      auto r = t.routes.find({tag, static_cast<uint8_t>(p.cls), p.src, p.dst});
      if (r == t.routes.end()) {
        load->Problem(absl::StrCat(what, ": no route at ", graph_.name(u), " (dropped)"));
        return end;
      }
      if (r->second->multicast_group != 0) {
        load->Problem(absl::StrCat(what, ": multicast route at ", graph_.name(u)));
        return end;
      }
      if (r->second->egress_port == 0) {
        load->Problem(absl::StrCat(what, ": route drops at ", graph_.name(u)));
        return end;
      }
      auto arc = port_arc_.find({u, r->second->egress_port});
      if (arc == port_arc_.end()) {
        load->Problem(absl::StrCat(what, ": no link on port ", r->second->egress_port, " of ",
                                   graph_.name(u)));
        return end;
      }
      (*arc_units)[arc->second] += 1;
      latency_us += ArcLatency(arc->second);
      u = ArcHead(arc->second);
    }
  }

  // The latency from switch u's upstream unit to the PS, through its parents; infinity when the
  // trace did not reach the PS (a problem already) or the parents loop.
  double LatencyToPs(const std::map<int, AggState>& agg, int u, std::set<int>* visiting) {
    auto it = agg.find(u);
    if (it == agg.end() || !it->second.emitted || !visiting->insert(u).second) return kInfinity;
    const TraceEnd& up = it->second.up;
    if (up.kind == TraceEnd::kPs) return up.latency_us;
    if (up.kind == TraceEnd::kInput) return up.latency_us + LatencyToPs(agg, up.node, visiting);
    return kInfinity;
  }

  void EvaluateTag(const std::string& ps, double u_t, uint32_t tag, const ChunkRange& range,
                   JobLoad* load) {
    const int ps_node = graph_.index(ps);
    if (ps_node < 0 || !graph_.is_host(ps_node)) {
      load->Problem(absl::StrCat("PS ", ps, " is not a host of the topology"));
      return;
    }
    const uint32_t ps_addr = address_[ps_node];
    std::map<int, double> arc_units;
    std::map<int, double> processing_units;
    double ps_units = 0;
    std::map<int, AggState> agg;
    std::deque<TraceEnd> arrivals;  // inputs reaching aggregation switches, to process

    auto handle = [&](const TraceEnd& end) {
      if (end.kind == TraceEnd::kPs) ps_units += 1;
      if (end.kind == TraceEnd::kInput) arrivals.push_back(end);
    };

    for (const FlowPlan* f : range.flows) {
      const int w = graph_.index(f->worker);
      if (w < 0 || !graph_.is_host(w)) {
        load->Problem(absl::StrCat("worker ", f->worker, " is not a host of the topology"));
        continue;
      }
      if (w == ps_node) continue;  // its own PS: nothing on the network
      const std::vector<int>& out = graph_.out_arcs(w);
      if (out.empty()) {
        load->Problem(absl::StrCat("worker ", f->worker, " has no link that is up"));
        continue;
      }
      int access = out[0];
      if (out.size() > 1 && f->path.size() > 1) {
        for (int a : out) {
          if (graph_.name(ArcHead(a)) == f->path[1]) {
            access = a;
            break;
          }
        }
      }
      arc_units[access] += 1;
      Packet p{RouteClass::kRaw, false, address_[w], ps_addr};
      handle(Trace(tag, ps_node, p, ArcHead(access), false, ArcLatency(access), &arc_units, load));
    }

    while (!arrivals.empty()) {
      const TraceEnd in = arrivals.front();
      arrivals.pop_front();
      const int u = in.node;
      const JobAggregationIntent& ji = *tables_[u].jobs.at(tag);
      const std::string at = absl::StrCat("tag ", tag, " at ", graph_.name(u), ": ");
      if (!graph_.ina_capable(u)) load->Problem(at + "aggregates on a switch without INA");
      if (ji.fan_in > kMaxFanIn) load->Problem(absl::StrCat(at, "fan-in ", ji.fan_in, " > 64"));
      if (in.index >= ji.fan_in) {
        load->Problem(absl::StrCat(at, "input index ", in.index, " >= fan-in ", ji.fan_in));
      }
      const uint64_t mask = ji.fan_in >= 64 ? ~uint64_t{0} : ((uint64_t{1} << ji.fan_in) - 1);
      if (ji.fan_in <= kMaxFanIn && ji.input_bitmap != mask) {
        load->Problem(at + "input bitmap is not the fan-in's bits");
      }
      auto [it, first] = agg.try_emplace(u);
      AggState& s = it->second;
      if (first) {
        s.fallback = ji.window == 0 || ji.aggregator_count == 0;
        if (!s.fallback && tables_[u].beyond_memory.count(tag)) {
          load->Problem(at + "window reaches aggregators the switch does not have (fallback)");
        }
      }
      if (!s.bits.insert(in.index).second) {
        load->Problem(absl::StrCat(at, "input ", in.index, " arrives twice"));
      }
      Packet up{RouteClass::kUpstream, s.fallback, ji.self_address, ji.upstream_address};
      if (s.fallback) {
        // Every input goes on unaggregated.
        TraceEnd end = Trace(tag, ps_node, up, u, true, 0, &arc_units, load);
        if (!s.emitted) s.up = end;
        s.emitted = true;
        handle(end);
        continue;
      }
      processing_units[u] += 1;
      if (s.emitted) continue;
      s.emitted = true;
      s.up = Trace(tag, ps_node, up, u, true, 0, &arc_units, load);
      handle(s.up);
    }

    // Completion, and the memory caps of the switches that aggregate.
    for (const auto& [u, s] : agg) {
      if (s.fallback) continue;
      const JobAggregationIntent& ji = *tables_[u].jobs.at(tag);
      if (s.bits.size() != ji.fan_in) {
        load->Problem(absl::StrCat("tag ", tag, " at ", graph_.name(u), ": ", s.bits.size(),
                                   " of fan-in ", ji.fan_in,
                                   " inputs arrive (the aggregation never completes)"));
      }
      double hold = timing_.arrival_spread_us;
      if (plan_.memory_policy != "esa") {
        std::set<int> visiting;
        const double to_ps = LatencyToPs(agg, u, &visiting);
        if (std::isinf(to_ps)) continue;  // the route is a problem already
        hold += 2 * to_ps + timing_.host_turnaround_us;
      }
      if (hold <= 0 || u_t <= 0) continue;
      const double window = tables_[u].effective_window.at(tag);
      const int bytes = topology_.switches[u].ina.aggregator_bytes;
      const double cap = window * bytes / (hold * kBytesPerGbitUs * u_t);
      if (cap < load->cap) {
        load->cap = cap;
        load->cap_name = absl::StrCat("memory ", graph_.name(u), " tag ", tag);
      }
    }
    for (const auto& [arc, n] : arc_units) load->coefficients[arc] += n * u_t;
    for (const auto& [u, n] : processing_units) load->coefficients[NodeResource(u)] += n * u_t;
    if (ps_units > 0) load->coefficients[NodeResource(ps_node)] += ps_units * u_t;
  }

  void EvaluateJob(const JobPlan& jp, JobLoad* load) {
    const int ps_count = static_cast<int>(jp.ps_shares.size());
    int ps_index = 0;
    for (const auto& [ps, share] : jp.ps_shares) {
      std::set<std::string> workers;
      for (const FlowPlan& f : jp.flows) {
        if (f.ps == ps && !f.path.empty()) workers.insert(f.worker);
      }
      const std::vector<ChunkRange> ranges = ChunkRangesOf(jp, ps);
      double covered = 0;
      for (const ChunkRange& range : ranges) {
        covered = range.end;
        if (range.flows.size() < workers.size()) {
          std::set<std::string> missing = workers;
          for (const FlowPlan* f : range.flows) missing.erase(f->worker);
          load->Problem(absl::StrCat("range ", range.index, " of PS ", ps, " has no flow of ",
                                     missing.empty() ? std::string("a worker") : *missing.begin()));
        }
        const uint32_t tag =
            AggregationTag(jp.job_id, ps_index, range.index, jp.generation, ps_count);
        EvaluateTag(ps, share * (range.end - range.begin), tag, range, load);
      }
      if (!workers.empty() && covered < 1 - 1e-9) {
        load->Problem(absl::StrCat("chunks [", covered, ", 1) of PS ", ps, " have no tag"));
      }
      ++ps_index;
    }
  }

  // Max-min fair progressive filling.
  std::vector<IntentJobRate> Fill(const std::vector<const JobPlan*>& jobs,
                                  const std::vector<JobLoad>& loads) {
    const size_t n = jobs.size();
    std::vector<IntentJobRate> out(n);
    std::vector<bool> active(n, false);
    std::set<int> resources;
    for (size_t j = 0; j < n; ++j) {
      out[j].job_id = jobs[j]->job_id;
      out[j].problems = loads[j].problems;
      if (!loads[j].problems.empty()) {
        out[j].bottleneck = "problem";
        continue;
      }
      active[j] = true;
      for (const auto& [r, c] : loads[j].coefficients) resources.insert(r);
    }
    std::map<int, double> used;  // resource -> load at the current rates
    while (std::find(active.begin(), active.end(), true) != active.end()) {
      // The smallest raise that saturates a resource or reaches a cap.
      double step = kInfinity;
      std::map<int, double> raise;  // resource -> per-step load of the active jobs
      for (size_t j = 0; j < n; ++j) {
        if (!active[j]) continue;
        for (const auto& [r, c] : loads[j].coefficients) {
          if (c > 0) raise[r] += c;
        }
        step = std::min(step, loads[j].cap - out[j].rate_gbps);
      }
      for (const auto& [r, c] : raise) {
        step = std::min(step, std::max(0.0, Capacity(r) - used[r]) / c);
      }
      if (std::isinf(step)) {
        for (size_t j = 0; j < n; ++j) {
          if (!active[j]) continue;
          out[j].rate_gbps = kInfinity;
          out[j].bottleneck = "none";
          active[j] = false;
        }
        break;
      }
      step = std::max(step, 0.0);
      for (size_t j = 0; j < n; ++j) {
        if (!active[j]) continue;
        out[j].rate_gbps += step;
      }
      for (const auto& [r, c] : raise) used[r] += c * step;
      std::set<int> saturated;
      for (const auto& [r, c] : raise) {
        const double cap = Capacity(r);
        if (used[r] >= cap - 1e-12 * std::max(1.0, cap)) saturated.insert(r);
      }
      for (size_t j = 0; j < n; ++j) {
        if (!active[j]) continue;
        for (const auto& [r, c] : loads[j].coefficients) {
          if (c > 0 && saturated.count(r)) {
            out[j].bottleneck = ResourceName(r);
            active[j] = false;
            break;
          }
        }
        const double cap = loads[j].cap;
        if (active[j] && out[j].rate_gbps >= cap - 1e-12 * std::max(1.0, cap)) {
          out[j].rate_gbps = cap;
          out[j].bottleneck = loads[j].cap_name;
          active[j] = false;
        }
      }
    }
    return out;
  }

  const Topology& topology_;
  Graph graph_;
  const Plan& plan_;
  IntentTimingOptions timing_;
  std::vector<Tables> tables_;
  std::vector<uint32_t> address_;
  std::map<std::pair<int, uint32_t>, int> port_arc_;  // (switch, port) -> arc leaving it
};

}  // namespace

absl::StatusOr<std::vector<IntentJobRate>> EvaluateIntents(const Topology& topology,
                                                           const Plan& plan,
                                                           const std::vector<SwitchIntent>& intents,
                                                           const IntentTimingOptions& timing) {
  Evaluator evaluator(topology, plan, timing);
  if (absl::Status s = evaluator.Load(intents); !s.ok()) return s;
  return evaluator.Run();
}

}  // namespace inac::core
