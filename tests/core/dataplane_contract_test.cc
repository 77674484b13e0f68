// The data-plane contract between core::DeriveSwitchIntents and api/p4/ina.p4, checked hop by hop:
// a small interpreter of what ina.p4 does with the entries of a SwitchIntent
// (ina_job, ina_worker, ina_route keyed by (tag, class, source, destination), multicast groups,
// ina_host on egress) walks every packet class through random fabrics and plans: raw chunks from
// every worker, aggregates and fallbacks from aggregation switches, and the PS's results. It
// proves, per aggregation tag, that every worker's contribution reaches the PS exactly once
// (aggregated in the network, or all of it falling back), that no packet loops, is dropped for
// want of a route or reaches the wrong host, and that every worker receives each result exactly
// once, addressed to itself.
//
// The interpreter follows ina.p4's apply block: RESULT packets are looked up with destination 0
// and replicated; a packet without FALLBACK whose tag hits ina_job and whose source hits
// ina_worker is aggregated (or, in the fallback run, sent on unaggregated) and leaves as an
// UPSTREAM packet from the switch's own address; everything else is routed by ina_route. The
// aggregators themselves (slots, windows, preemption) are exercised by the data-plane tests
// against BMv2; here every aggregation either completes or falls back entirely.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/generators.h"
#include "core/plan.h"
#include "core/ring_intents.h"

namespace inac::core {
namespace {

constexpr uint8_t kResult = 1, kFallback = 2, kAggregate = 4;

struct Packet {
  uint32_t tag = 0;
  uint8_t flags = 0;
  uint32_t src = 0;
  uint32_t dst = 0;
  std::multiset<std::string> contents;  // the workers whose data the packet carries
  int ttl = 64;
};

struct Arrival {
  std::string host;
  Packet packet;
  uint64_t mac = 0;  // the frame's destination MAC (0: not rewritten)
};

class ContractInterpreter {
 public:
  ContractInterpreter(const Topology& topology, const std::vector<SwitchIntent>& intents,
                      bool aggregate)
      : topology_(topology), graph_(topology), aggregate_(aggregate) {
    for (size_t i = 0; i < intents.size(); ++i) {
      const int u = graph_.index(intents[i].switch_id);
      State& s = state_[u];
      for (const auto& j : intents[i].jobs) s.jobs[j.tag] = j;
      for (const auto& in : intents[i].inputs) s.inputs[{in.tag, in.source_address}] = in.index;
      for (const auto& r : intents[i].routes) {
        s.routes[{r.tag, static_cast<uint8_t>(r.packet_class), r.source_address,
                  r.destination_address}] = r;
      }
      for (const auto& g : intents[i].multicast_groups) s.groups[g.group_id] = g.egress_ports;
      for (const auto& h : intents[i].host_ports) s.hosts[h.port] = h;
    }
    for (int l = 0; l < static_cast<int>(topology.links.size()); ++l) {
      const Link& link = topology.links[l];
      if (link.status != LinkStatus::kUp) continue;
      const int a = graph_.index(link.a), b = graph_.index(link.b);
      if (graph_.is_switch(a)) port_to_[{a, PortOf(topology, link.a, l)}] = b;
      if (graph_.is_switch(b)) port_to_[{b, PortOf(topology, link.b, l)}] = a;
    }
  }

  // Sends `packet` from host `from` (onto its first up link) and runs the fabric until no packet
  // is in flight. Arrivals at hosts are appended to `arrivals`, problems to `errors`.
  void Inject(const std::string& from, Packet packet) {
    const int h = graph_.index(from);
    if (graph_.out_arcs(h).empty()) {
      errors.push_back(absl::StrCat(from, " has no link"));
      return;
    }
    queue_.push_back({graph_.arc(graph_.out_arcs(h)[0]).to, std::move(packet), 0});
    while (!queue_.empty()) {
      auto [node, p, mac] = std::move(queue_.front());
      queue_.pop_front();
      if (graph_.is_host(node)) {
        arrivals.push_back({graph_.name(node), std::move(p), mac});
        continue;
      }
      Process(node, std::move(p));
    }
  }

  std::vector<Arrival> arrivals;
  std::vector<std::string> errors;

 private:
  struct State {
    std::map<uint32_t, JobAggregationIntent> jobs;
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> inputs;
    std::map<std::tuple<uint32_t, uint8_t, uint32_t, uint32_t>, RouteIntent> routes;
    std::map<uint32_t, std::vector<uint32_t>> groups;
    std::map<uint32_t, HostPortIntent> hosts;
    // Aggregation in progress per tag: input bits seen and the data summed.
    std::map<uint32_t, std::pair<uint64_t, std::multiset<std::string>>> partial;
  };
  struct InFlight {
    int node;
    Packet packet;
    uint64_t mac;
  };

  void Emit(int u, uint32_t port, Packet p) {
    auto it = port_to_.find({u, port});
    if (it == port_to_.end()) {
      errors.push_back(absl::StrCat(graph_.name(u), ": no link on port ", port));
      return;
    }
    uint64_t mac = 0;
    auto host = state_[u].hosts.find(port);
    if (host != state_[u].hosts.end()) {
      mac = host->second.mac;
      if (p.flags & kResult) p.dst = host->second.address;
    }
    queue_.push_back({it->second, std::move(p), mac});
  }

  void Process(int u, Packet p) {
    State& s = state_[u];
    if (--p.ttl <= 0) {
      errors.push_back(absl::StrCat("tag ", p.tag, ": loop through ", graph_.name(u)));
      return;
    }
    if (p.flags & kResult) {
      p.dst = 0;
    } else if (!(p.flags & kFallback) && s.jobs.count(p.tag) && s.inputs.count({p.tag, p.src})) {
      const JobAggregationIntent& job = s.jobs[p.tag];
      const uint64_t bit = uint64_t{1} << s.inputs[{p.tag, p.src}];
      p.src = job.self_address;
      p.dst = job.upstream_address;
      if (!aggregate_) {
        p.flags |= kFallback;
      } else {
        auto& [bits, data] = s.partial[p.tag];
        if (bits & bit) {
          errors.push_back(absl::StrCat(graph_.name(u), ": input bit twice for tag ", p.tag));
          return;
        }
        bits |= bit;
        data.insert(p.contents.begin(), p.contents.end());
        if (bits != job.input_bitmap) return;  // absorbed
        p.contents = std::move(data);
        s.partial.erase(p.tag);
        p.flags |= kAggregate;
      }
    }
    const uint8_t cls = (p.flags & kResult) ? 2 : (p.flags & (kFallback | kAggregate)) ? 1 : 0;
    auto r = s.routes.find({p.tag, cls, p.src, p.dst});
    if (r == s.routes.end()) {
      errors.push_back(absl::StrCat(graph_.name(u), ": no route for tag ", p.tag, " class ",
                                    int{cls}, " ", FormatIpv4(p.src), " -> ", FormatIpv4(p.dst)));
      return;
    }
    if (r->second.multicast_group != 0) {
      for (uint32_t port : s.groups[r->second.multicast_group]) Emit(u, port, p);
    } else if (r->second.egress_port != 0) {
      Emit(u, r->second.egress_port, std::move(p));
    } else {
      errors.push_back(absl::StrCat(graph_.name(u), ": route drops tag ", p.tag));
    }
  }

  const Topology& topology_;
  Graph graph_;
  bool aggregate_;
  std::map<int, State> state_;
  std::map<std::pair<int, uint32_t>, int> port_to_;
  std::deque<InFlight> queue_;
};

// A shortest path over up links, ties broken at random; hosts do not forward.
std::vector<std::string> RandomShortestPath(const Graph& g, int from, int to, std::mt19937& rng) {
  std::vector<int> dist(g.num_nodes(), -1);
  std::deque<int> q = {from};
  dist[from] = 0;
  while (!q.empty()) {
    int u = q.front();
    q.pop_front();
    if (u != from && !g.is_switch(u)) continue;
    for (int a : g.out_arcs(u)) {
      int v = g.arc(a).to;
      if (dist[v] < 0) {
        dist[v] = dist[u] + 1;
        q.push_back(v);
      }
    }
  }
  std::vector<std::string> path = {g.name(to)};
  for (int v = to; v != from;) {
    std::vector<int> prev;
    for (int a : g.out_arcs(v)) {
      int u = g.arc(a).to;
      if (dist[u] == dist[v] - 1 && (u == from || g.is_switch(u))) prev.push_back(u);
    }
    v = prev[rng() % prev.size()];
    path.push_back(g.name(v));
  }
  return {path.rbegin(), path.rend()};
}

// A random plan: jobs of 2-6 workers and 1-2 PSs on distinct hosts; each worker's flow toward a
// PS is aggregated at a random INA switch of a random shortest path (or at the PS), and some
// shards are split into two aligned chunk ranges aggregated at different nodes.
// With `max_ranges` > 2 a split shard is cut at up to max_ranges - 1 common random points of the
// 1/1024 grid (at most MaxRangesPerShard of the job's PS count) and each worker's range goes to
// its own random node, as grid-split's plans do.
// With `chains` some aggregation switches send their stream to an INA switch further on their
// path to the PS (its aggregator path ends there, as RoutedStream::via), which re-aggregates it:
// two-level aggregation as ATP's.
Plan RandomPlan(const Topology& t, std::mt19937& rng, int jobs, int max_ranges = 2,
                bool chains = false) {
  Graph g(t);
  std::vector<std::string> hosts;
  for (const Host& h : t.hosts) hosts.push_back(h.id);
  Plan plan;
  plan.version = 1;
  for (int j = 0; j < jobs; ++j) {
    std::shuffle(hosts.begin(), hosts.end(), rng);
    const int workers = 2 + rng() % 5, pss = 1 + rng() % 2;
    JobPlan jp;
    jp.job_id = 1 + j;
    jp.priority = rng() % 3;
    jp.generation = rng() % 6;  // tags carry it (core::AggregationTag)
    for (int p = 0; p < pss; ++p) jp.ps_shares[hosts[workers + p]] = 1.0 / pss;
    for (const auto& [ps, share] : jp.ps_shares) {
      const bool split = max_ranges > 2 ? rng() % 3 != 0 : rng() % 3 == 0;
      // The shard's common cut points (many-range plans).
      std::vector<double> cuts = {0, 1};
      if (max_ranges > 2) {
        const int limit = std::min(max_ranges, MaxRangesPerShard(pss));
        std::set<int> points;
        const int want = 1 + static_cast<int>(rng() % limit);
        while (static_cast<int>(points.size()) + 1 < want) points.insert(1 + rng() % 1023);
        cuts = {0};
        for (int q : points) cuts.push_back(q / 1024.0);
        cuts.push_back(1);
      }
      for (int w = 0; w < workers; ++w) {
        const std::string& worker = hosts[w];
        std::vector<std::string> path = RandomShortestPath(g, g.index(worker), g.index(ps), rng);
        auto choose = [&]() -> size_t {  // index of the aggregation node on `path`
          std::vector<size_t> ina;
          for (size_t i = 1; i + 1 < path.size(); ++i) {
            if (g.ina_capable(g.index(path[i]))) ina.push_back(i);
          }
          if (ina.empty() || rng() % 4 == 0) return path.size() - 1;
          return ina[rng() % ina.size()];
        };
        std::vector<double> fractions = {1.0};
        if (split && max_ranges > 2) {
          fractions.clear();
          for (size_t k = 0; k + 1 < cuts.size(); ++k) fractions.push_back(cuts[k + 1] - cuts[k]);
        } else if (split && rng() % 2) {
          fractions = {0.5, 0.5};
        }
        const int parts = static_cast<int>(fractions.size());
        for (int part = 0; part < parts; ++part) {
          const size_t at = choose();
          FlowPlan f;
          f.worker = worker;
          f.ps = ps;
          f.aggregation_node = path[at];
          f.path.assign(path.begin(), path.begin() + at + 1);
          f.fraction = fractions[part];
          if (at + 1 < path.size() && rng() % 2) {
            bool have = false;
            for (const auto& ap : jp.aggregator_paths)
              have |= ap.switch_id == path[at] && ap.ps == ps;
            if (!have) {
              jp.aggregator_paths.push_back(
                  {path[at], ps, std::vector<std::string>(path.begin() + at, path.end())});
            }
          }
          if (at + 1 < path.size()) jp.aggregators[path[at]] = 1 + rng() % 64;
          jp.flows.push_back(std::move(f));
        }
      }
    }
    if (chains) {
      // Re-point some aggregator paths that reach their PS at an INA switch on the way.
      const size_t n = jp.aggregator_paths.size();
      for (size_t i = 0; i < n; ++i) {
        AggregatorPlan& child = jp.aggregator_paths[i];
        if (rng() % 2 || child.path.size() < 3 || child.path.back() != child.ps) continue;
        bool is_parent = false;
        for (const auto& ap : jp.aggregator_paths) is_parent |= ap.path.back() == child.switch_id;
        if (is_parent) continue;
        std::vector<size_t> ina;
        for (size_t k = 1; k + 1 < child.path.size(); ++k) {
          if (g.ina_capable(g.index(child.path[k]))) ina.push_back(k);
        }
        if (ina.empty()) continue;
        const size_t k = ina[rng() % ina.size()];
        const std::string parent = child.path[k];
        const AggregatorPlan* own = nullptr;
        for (const auto& ap : jp.aggregator_paths) {
          if (ap.switch_id == parent && ap.ps == child.ps) own = &ap;
        }
        if (own != nullptr && own->path.back() != child.ps) continue;  // no deeper chains
        std::vector<std::string> rest(child.path.begin() + k, child.path.end());
        child.path.resize(k + 1);
        if (own == nullptr) {
          jp.aggregator_paths.push_back({parent, child.ps, rest});
          jp.aggregators[parent] = 1 + rng() % 64;
        }
      }
    }
    plan.jobs.push_back(std::move(jp));
  }
  return plan;
}

// The workers of each tag, computed independently of DeriveSwitchIntents: the ranges of a
// (job, PS) are cut where any worker's flows are cut (every worker covers every range).
std::map<uint32_t, std::set<std::string>> WorkersByTag(const Plan& plan) {
  std::map<uint32_t, std::set<std::string>> out;
  for (const JobPlan& jp : plan.jobs) {
    int ps_index = 0;
    const int pss = static_cast<int>(jp.ps_shares.size());
    for (const auto& [ps, share] : jp.ps_shares) {
      std::set<long> cuts;
      std::map<std::string, double> at;
      std::set<std::string> workers;
      for (const FlowPlan& f : jp.flows) {
        if (f.ps != ps) continue;
        workers.insert(f.worker);
        at[f.worker] += f.fraction;
        if (at[f.worker] < 1 - 1e-9) cuts.insert(std::lround(at[f.worker] * 1e9));
      }
      const int ranges = std::min<int>(static_cast<int>(cuts.size()) + 1, MaxRangesPerShard(pss));
      for (int r = 0; r < ranges; ++r)
        out[AggregationTag(jp.job_id, ps_index, r, jp.generation, pss)] = workers;
      ++ps_index;
    }
  }
  return out;
}

std::string PsOfTag(const Plan& plan, uint32_t tag) {
  for (const JobPlan& jp : plan.jobs) {
    int ps_index = 0;
    const int pss = static_cast<int>(jp.ps_shares.size());
    for (const auto& [ps, share] : jp.ps_shares) {
      for (int r = 0; r < MaxRangesPerShard(pss); ++r) {
        if (AggregationTag(jp.job_id, ps_index, r, jp.generation, pss) == tag) return ps;
      }
      ++ps_index;
    }
  }
  return "";
}

void CheckPlan(const Topology& t, const Plan& plan, const std::string& name) {
  const auto intents = DeriveSwitchIntents(t, plan);
  for (const auto& [tag, workers] : WorkersByTag(plan)) {
    const std::string ps = PsOfTag(plan, tag);
    for (bool aggregate : {true, false}) {
      SCOPED_TRACE(absl::StrCat(name, " tag ", tag, aggregate ? " aggregated" : " fallback"));
      ContractInterpreter fabric(t, intents, aggregate);
      // One chunk from every worker of the tag.
      for (const std::string& w : workers) {
        Packet p;
        p.tag = tag;
        p.src = NodeAddress(t, w);
        p.dst = NodeAddress(t, ps);
        p.contents = {w};
        fabric.Inject(w, p);
      }
      EXPECT_TRUE(fabric.errors.empty()) << absl::StrJoin(fabric.errors, "\n");
      std::multiset<std::string> at_ps;
      for (const Arrival& a : fabric.arrivals) {
        EXPECT_EQ(a.host, ps) << "delivered to the wrong host";
        EXPECT_EQ(a.packet.dst, NodeAddress(t, ps));
        EXPECT_EQ(a.mac, NodeMac(t, ps));
        at_ps.insert(a.packet.contents.begin(), a.packet.contents.end());
      }
      EXPECT_EQ(at_ps, std::multiset<std::string>(workers.begin(), workers.end()))
          << "each worker's chunk must reach the PS exactly once";
    }
    // The result, multicast back.
    SCOPED_TRACE(absl::StrCat(name, " tag ", tag, " result"));
    ContractInterpreter fabric(t, intents, true);
    Packet result;
    result.tag = tag;
    result.flags = kResult;
    result.src = NodeAddress(t, ps);
    result.dst = NodeAddress(t, ps);
    fabric.Inject(ps, result);
    EXPECT_TRUE(fabric.errors.empty()) << absl::StrJoin(fabric.errors, "\n");
    std::map<std::string, int> copies;
    for (const Arrival& a : fabric.arrivals) {
      ++copies[a.host];
      EXPECT_EQ(a.packet.dst, NodeAddress(t, a.host)) << "result not addressed to " << a.host;
      EXPECT_EQ(a.mac, NodeMac(t, a.host));
    }
    std::map<std::string, int> want;
    for (const std::string& w : workers) want[w] = 1;
    EXPECT_EQ(copies, want) << "every worker gets each result exactly once, nobody else";
  }
}

TEST(DataplaneContractTest, RandomPlansOnRandomFabrics) {
  std::mt19937 rng(20261124);
  for (int round = 0; round < 40; ++round) {
    GeneratorOptions o;
    o.ina = *ParseInaPlacement(round % 3 == 0 ? "all" : round % 3 == 1 ? "tor" : "random:0.5");
    o.seed = round;
    Topology t = round % 2 == 0 ? *GenerateLeafSpine(3 + round % 3, 2 + round % 2, 4, o)
                                : *GenerateFatTree(4, o);
    Plan plan = RandomPlan(t, rng, 1 + round % 4);
    plan.memory_policy = round % 2 ? "esa" : "switchml";
    CheckPlan(t, plan, absl::StrCat("round ", round));
    if (HasFailure()) return;
  }
}

// Split plans as grid-split makes them: shards cut into up to 64 aligned
// ranges (one PS; 32 with two), each its own tag, each worker's range at its own node.
TEST(DataplaneContractTest, SplitPlansWithManyRanges) {
  std::mt19937 rng(20261125);
  for (int round = 0; round < 12; ++round) {
    GeneratorOptions o;
    o.ina = *ParseInaPlacement(round % 2 == 0 ? "all" : "random:0.5");
    o.seed = 100 + round;
    Topology t = round % 2 == 0 ? *GenerateLeafSpine(3, 2, 4, o) : *GenerateFatTree(4, o);
    Plan plan = RandomPlan(t, rng, 1 + round % 2, /*max_ranges=*/64);
    plan.memory_policy = round % 2 ? "esa" : "switchml";
    size_t tags = 0;
    for (const SwitchIntent& si : DeriveSwitchIntents(t, plan)) tags += si.jobs.size();
    EXPECT_GT(tags, 0u);
    CheckPlan(t, plan, absl::StrCat("split round ", round));
    if (HasFailure()) return;
  }
}

// Chains (two-level aggregation): a switch's aggregate is an input of its parent
// (an ina_worker entry for the child's address), its upstream route runs through the parent, and
// every chunk still reaches the PS exactly once -- aggregated twice, or all of it falling back
// (the child's FALLBACK packets routed on through the parent) -- and every result reaches every
// worker once.
TEST(DataplaneContractTest, ChainsOfAggregators) {
  std::mt19937 rng(20261126);
  int chained = 0;
  for (int round = 0; round < 30; ++round) {
    GeneratorOptions o;
    o.ina = *ParseInaPlacement(round % 2 == 0 ? "all" : "random:0.7");
    o.seed = 200 + round;
    Topology t = round % 3 == 0 ? *GenerateLeafSpine(3, 2, 4, o) : *GenerateFatTree(4, o);
    Plan plan = RandomPlan(t, rng, 1 + round % 3, /*max_ranges=*/round % 2 ? 16 : 2,
                           /*chains=*/true);
    plan.memory_policy = round % 2 ? "esa" : "switchml";
    // Count the switches that are an input of another switch.
    for (const SwitchIntent& si : DeriveSwitchIntents(t, plan)) {
      std::set<uint32_t> switch_addresses;
      for (const Switch& sw : t.switches) switch_addresses.insert(NodeAddress(t, sw.id));
      for (const auto& in : si.inputs) chained += switch_addresses.count(in.source_address);
    }
    CheckPlan(t, plan, absl::StrCat("chain round ", round));
    if (HasFailure()) return;
  }
  EXPECT_GT(chained, 10) << "the generator must make chains";
}

// A random ring all-reduce plan in the shape scheduler::RingToJobPlan makes (Rina): racks behind
// INA-capable ToRs become abstract members (an agent, the rack's other workers aggregated at the
// ToR), other hosts plain members; each hop is routed between the members' ports (the ToR of an
// abstract rack, else the host) on a random shortest path, sometimes in two parts.
JobPlan RandomRingPlan(const Topology& t, std::mt19937& rng, JobId id) {
  Graph g(t);
  std::map<std::string, std::vector<std::string>> rack_hosts;  // ToR -> hosts
  for (const Host& h : t.hosts) {
    const int v = g.index(h.id);
    if (!g.out_arcs(v).empty()) rack_hosts[g.name(g.arc(g.out_arcs(v)[0]).to)].push_back(h.id);
  }
  JobPlan jp;
  jp.job_id = id;
  jp.generation = rng() % 6;
  std::map<std::string, std::string> port_of;  // member -> its port
  std::vector<std::string> members;
  for (auto& [tor, hosts] : rack_hosts) {
    std::shuffle(hosts.begin(), hosts.end(), rng);
    const int take = static_cast<int>(rng() % (hosts.size() + 1));
    if (take == 0) continue;
    if (g.ina_capable(g.index(tor)) && rng() % 3 != 0) {
      const std::string agent = hosts[0];
      members.push_back(agent);
      port_of[agent] = tor;
      for (int w = 1; w < take; ++w) {
        FlowPlan f;
        f.worker = hosts[w];
        f.ps = agent;
        f.aggregation_node = tor;
        f.path = {hosts[w], tor};
        jp.flows.push_back(std::move(f));
      }
      jp.aggregator_paths.push_back({tor, agent, {tor, agent}});
      jp.aggregators[tor] = 1 + rng() % 64;
    } else {
      for (int w = 0; w < take; ++w) {
        members.push_back(hosts[w]);
        port_of[hosts[w]] = hosts[w];
      }
    }
  }
  std::shuffle(members.begin(), members.end(), rng);
  jp.ring = members;
  const int n = static_cast<int>(members.size());
  for (int i = 0; n > 1 && i < n; ++i) {
    const std::string& from = port_of[members[i]];
    const std::string& to = port_of[members[(i + 1) % n]];
    const int parts = 1 + static_cast<int>(rng() % 2);
    for (int part = 0; part < parts; ++part) {
      FlowPlan f;
      f.worker = from;
      f.ps = members[(i + 1) % n];
      f.aggregation_node = to;
      f.path = RandomShortestPath(g, g.index(from), g.index(to), rng);
      f.fraction = 1.0 / parts;
      jp.flows.push_back(std::move(f));
    }
  }
  return jp;
}

// Rina (docs/rina.md "Data plane"): every abstract rack's workers reach their agent exactly once
// (aggregated at the ToR, or all of it falling back), the agent's result reaches every worker of
// the rack once; every ring hop's data reaches the next member and its acknowledgement (flag
// AGGREGATE) the previous one, addressed to them, with nothing aggregated on the way.
TEST(DataplaneContractTest, RinaRacksAndRingHops) {
  std::mt19937 rng(20261127);
  int racks = 0, hops = 0;
  for (int round = 0; round < 30; ++round) {
    GeneratorOptions o;
    o.ina = *ParseInaPlacement(round % 3 == 0 ? "tor" : round % 3 == 1 ? "all" : "random:0.5");
    o.seed = 300 + round;
    Topology t = round % 2 == 0 ? *GenerateLeafSpine(4, 2, 4, o) : *GenerateFatTree(4, o);
    Plan plan;
    plan.version = 1;
    plan.memory_policy = round % 2 ? "esa" : "switchml";
    if (round % 4 == 3) plan = RandomPlan(t, rng, 1);  // a PS job beside the ring
    plan.jobs.push_back(RandomRingPlan(t, rng, 9));
    const JobPlan& jp = plan.jobs.back();
    const auto intents = DeriveSwitchIntents(t, plan);
    const std::string name = absl::StrCat("ring round ", round);
    for (const RingRackPlan& rack : RingRacksOf(jp)) {
      if (rack.workers.empty()) continue;
      ++racks;
      const uint32_t tag = RingRackTag(jp.job_id, rack.index, jp.generation);
      for (bool aggregate : {true, false}) {
        SCOPED_TRACE(
            absl::StrCat(name, " rack ", rack.tor, aggregate ? " aggregated" : " fallback"));
        ContractInterpreter fabric(t, intents, aggregate);
        for (const std::string& w : rack.workers) {
          Packet p;
          p.tag = tag;
          p.src = NodeAddress(t, w);
          p.dst = NodeAddress(t, rack.agent);
          p.contents = {w};
          fabric.Inject(w, p);
        }
        EXPECT_TRUE(fabric.errors.empty()) << absl::StrJoin(fabric.errors, "\n");
        std::multiset<std::string> at_agent;
        for (const Arrival& a : fabric.arrivals) {
          EXPECT_EQ(a.host, rack.agent);
          EXPECT_EQ(a.mac, NodeMac(t, rack.agent));
          at_agent.insert(a.packet.contents.begin(), a.packet.contents.end());
        }
        EXPECT_EQ(at_agent, std::multiset<std::string>(rack.workers.begin(), rack.workers.end()));
      }
      SCOPED_TRACE(absl::StrCat(name, " rack ", rack.tor, " result"));
      ContractInterpreter fabric(t, intents, true);
      Packet result;
      result.tag = tag;
      result.flags = kResult;
      result.src = NodeAddress(t, rack.agent);
      result.dst = NodeAddress(t, rack.workers.front());
      fabric.Inject(rack.agent, result);
      EXPECT_TRUE(fabric.errors.empty()) << absl::StrJoin(fabric.errors, "\n");
      std::map<std::string, int> copies, want;
      for (const Arrival& a : fabric.arrivals) {
        ++copies[a.host];
        EXPECT_EQ(a.packet.dst, NodeAddress(t, a.host));
      }
      for (const std::string& w : rack.workers) want[w] = 1;
      EXPECT_EQ(copies, want);
    }
    const int n = static_cast<int>(jp.ring.size());
    const uint32_t hop_tag = RingHopTag(jp.job_id, jp.generation);
    for (int i = 0; n > 1 && i < n; ++i) {
      ++hops;
      const std::string& from = jp.ring[i];
      const std::string& to = jp.ring[(i + 1) % n];
      for (uint8_t flags : {uint8_t{0}, kAggregate}) {
        // Data from -> to; the acknowledgement to -> from.
        const std::string& src = flags == 0 ? from : to;
        const std::string& dst = flags == 0 ? to : from;
        SCOPED_TRACE(absl::StrCat(name, " hop ", src, " -> ", dst, " flags ", int{flags}));
        ContractInterpreter fabric(t, intents, true);
        Packet p;
        p.tag = hop_tag;
        p.flags = flags;
        p.src = NodeAddress(t, src);
        p.dst = NodeAddress(t, dst);
        p.contents = {src};
        fabric.Inject(src, p);
        EXPECT_TRUE(fabric.errors.empty()) << absl::StrJoin(fabric.errors, "\n");
        ASSERT_EQ(fabric.arrivals.size(), 1u);
        EXPECT_EQ(fabric.arrivals[0].host, dst);
        EXPECT_EQ(fabric.arrivals[0].mac, NodeMac(t, dst));
        EXPECT_EQ(fabric.arrivals[0].packet.contents, std::multiset<std::string>{src});
      }
    }
    // Nothing of the ring's hops is aggregated anywhere.
    for (const SwitchIntent& si : intents) {
      for (const auto& j : si.jobs) EXPECT_NE(j.tag, hop_tag) << si.switch_id;
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(racks, 10);
  EXPECT_GT(hops, 30);
}

// Slots along chains: what the workers and switches of every tag do with chunk c, by the rules of
// docs/ina-pipeline.md ("Slots"), computed from the intents alone. A worker whose aggregation
// node gives the tag a region and a window W picks slot (slot_offset + c mod W) mod
// aggregator_count there (beyond the region, aggregator_count, when the window is 0); a switch
// aggregates a packet of slot s in aggregator aggregator_base + s when s < aggregator_count (else
// it falls back), and sends its aggregate on with slot s + upstream_slot_shift. The test proves,
// over random multi-job plans with chains under every memory policy, that each aggregating
// switch receives every input of chunk c in one aggregator of the tag's window (so chunk c
// aggregates at every level), that a switch without a region for the tag falls back, and that
// two tags never share an aggregator on a switch whose windows fit its pool: nothing of a tag
// is lost to misaligned or colliding slots while windows and grants allow it.
class SlotModel {
 public:
  SlotModel(const Topology& t, const std::vector<SwitchIntent>& intents) {
    for (const SwitchIntent& si : intents) {
      for (const auto& j : si.jobs) {
        jobs_[{j.tag, j.self_address}] = &j;
        switch_of_[{j.tag, j.self_address}] = si.switch_id;
      }
      for (const auto& in : si.inputs) {
        for (const auto& j : si.jobs) {
          if (j.tag == in.tag) inputs_[{j.tag, j.self_address}].push_back(in.source_address);
        }
      }
    }
    for (const Switch& s : t.switches) switch_address_.insert(NodeAddress(t, s.id));
  }

  // The slot the aggregation at (tag, switch address `at`) sees for chunk `c` from each input;
  // fails the test when they differ or leave the window. Returns the common slot.
  int64_t SlotAt(uint32_t tag, uint32_t at, uint32_t c, const std::string& where) {
    const JobAggregationIntent& j = *jobs_.at({tag, at});
    std::set<int64_t> slots;
    for (uint32_t src : inputs_[{tag, at}]) {
      if (switch_address_.contains(src) && jobs_.contains({tag, src})) {
        const JobAggregationIntent& child = *jobs_.at({tag, src});
        const int64_t s = SlotAt(tag, src, c, where);
        if (child.aggregator_count == 0 || s >= child.aggregator_count) {
          ++child_fallbacks;  // the child falls back: nothing of it aggregates here
          continue;
        }
        slots.insert(static_cast<uint32_t>(s + child.upstream_slot_shift));
      } else {
        // A worker aggregated here: the worker's rule with this switch's region and window.
        slots.insert(WorkerSlot(j, c));
      }
    }
    EXPECT_LE(slots.size(), 1u) << where << ": tag " << tag << " chunk " << c << " arrives at "
                                << switch_of_[{tag, at}] << " in slots "
                                << absl::StrJoin(slots, ",");
    if (slots.empty()) return j.aggregator_count;
    const int64_t s = *slots.begin();
    if (j.aggregator_count > 0 && j.window > 0) {
      // Inside the tag's window: [slot_offset, slot_offset + window) mod aggregator_count.
      const int64_t rel = (s - j.slot_offset + j.aggregator_count) % j.aggregator_count;
      EXPECT_LT(rel, j.window) << where << ": tag " << tag << " chunk " << c << " at "
                               << switch_of_[{tag, at}] << " slot " << s << " outside its window";
      ++aggregated;
    }
    return s;
  }

  static int64_t WorkerSlot(const JobAggregationIntent& j, uint32_t c) {
    if (j.aggregator_count == 0 || j.window == 0) return j.aggregator_count;
    return (static_cast<int64_t>(j.slot_offset) + c % j.window) % j.aggregator_count;
  }

  std::map<std::pair<uint32_t, uint32_t>, const JobAggregationIntent*> jobs_;
  std::map<std::pair<uint32_t, uint32_t>, std::string> switch_of_;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> inputs_;
  std::set<uint32_t> switch_address_;
  int64_t aggregated = 0, child_fallbacks = 0;
};

TEST(DataplaneContractTest, SlotsLineUpAlongChainsAndTagsNeverCollide) {
  std::mt19937 rng(20261128);
  int64_t chained_aggregations = 0, checked = 0;
  for (int round = 0; round < 36; ++round) {
    GeneratorOptions o;
    o.ina = *ParseInaPlacement(round % 2 == 0 ? "all" : "random:0.7");
    o.seed = 400 + round;
    Topology t = round % 3 == 0 ? *GenerateLeafSpine(3, 2, 4, o) : *GenerateFatTree(4, o);
    Plan plan = RandomPlan(t, rng, 2 + round % 3, /*max_ranges=*/round % 2 ? 8 : 2,
                           /*chains=*/true);
    plan.memory_policy = round % 3 == 0 ? "esa" : round % 3 == 1 ? "atp" : "switchml";
    const std::string name = absl::StrCat("slot round ", round, " (", plan.memory_policy, ")");
    const auto intents = DeriveSwitchIntents(t, plan);
    SlotModel model(t, intents);
    const Graph g(t);
    for (const SwitchIntent& si : intents) {
      // Per switch: the aggregators each tag's chunks use, over two windows of chunks.
      std::map<int64_t, uint32_t> owner;
      int64_t windows = 0;
      for (const auto& j : si.jobs) windows += j.window;
      const int64_t pool = std::min<int64_t>(32768, g.aggregators(g.index(si.switch_id)));
      for (const auto& j : si.jobs) {
        for (uint32_t c = 0; c < 2 * std::max<uint32_t>(j.window, 1); ++c) {
          const int64_t s = model.SlotAt(j.tag, j.self_address, c, name);
          ++checked;
          if (j.aggregator_count == 0 || s >= j.aggregator_count) continue;
          const int64_t index = j.aggregator_base + s;
          auto [it, fresh] = owner.try_emplace(index, j.tag);
          if (windows <= pool) {
            EXPECT_EQ(it->second, j.tag) << name << ": tags " << it->second << " and " << j.tag
                                         << " share aggregator " << index << " on " << si.switch_id;
          }
        }
        if (HasFailure()) return;
      }
      for (const auto& in : si.inputs) {
        if (model.switch_address_.contains(in.source_address)) ++chained_aggregations;
      }
    }
  }
  EXPECT_GT(chained_aggregations, 20) << "the generator must make chains";
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace inac::core
