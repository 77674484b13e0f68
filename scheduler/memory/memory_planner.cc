#include "scheduler/memory/memory_planner.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "core/ring_intents.h"
#include "scheduler/memory/allocator.h"

namespace inac::scheduler {
namespace {

// Windows are sized for the planned rate plus this margin (rounding of the hold and the rate).
constexpr double kRateHeadroom = 0.02;

// Fewest-hop node path from `from` to `to` over up links (ids, both included); empty if none.
std::vector<std::string> FewestHopPath(const core::Graph& graph, const std::string& from,
                                       const std::string& to) {
  const int s = graph.index(from);
  const int t = graph.index(to);
  if (s < 0 || t < 0) return {};
  std::vector<int> parent(graph.num_nodes(), -2);
  std::deque<int> queue{s};
  parent[s] = -1;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    if (u == t) break;
    // Hosts other than the endpoints do not forward.
    if (u != s && graph.is_host(u)) continue;
    for (int arc : graph.out_arcs(u)) {
      const int v = graph.arc(arc).to;
      if (parent[v] != -2) continue;
      parent[v] = u;
      queue.push_back(v);
    }
  }
  if (parent[t] == -2) return {};
  std::vector<std::string> path;
  for (int v = t; v != -1; v = parent[v]) path.push_back(graph.name(v));
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

MemoryJobState MemoryJobStateFromJob(const core::Job& job, int64_t now_ms, int64_t age_grid_ms) {
  MemoryJobState state;
  state.id = job.id;
  state.user_priority = job.spec.priority;
  state.workers = job.spec.workers;
  const int64_t remaining = std::max<int64_t>(0, job.spec.iterations - job.iterations_done);
  state.remaining_comm_bytes =
      static_cast<double>(remaining) * static_cast<double>(job.spec.gradient_bytes);
  if (age_grid_ms > 0) {
    auto tick = [&](int64_t ms) {  // floor division, also for times before the epoch
      return ms >= 0 ? ms / age_grid_ms : -((-ms + age_grid_ms - 1) / age_grid_ms);
    };
    state.age_s = std::max<double>(
        0, static_cast<double>(tick(now_ms) - tick(job.created_ms)) * age_grid_ms / 1000.0);
  } else {
    state.age_s = std::max<double>(0, static_cast<double>(now_ms - job.created_ms) / 1000.0);
  }
  state.admission = job.created_ms;
  return state;
}

double GrantHoldUs(const core::Graph& graph, const core::JobPlan& job, const std::string& switch_id,
                   const MemoryPlannerOptions& options) {
  return HoldTimeUs(options.policy, TimingAt(graph, job, switch_id, options.timing));
}

std::vector<std::string> AggregatingSwitches(const core::Graph& graph, const core::JobPlan& job) {
  std::set<std::string> switches;
  auto add = [&](const std::string& id) {
    const int node = graph.index(id);
    if (node >= 0 && graph.is_switch(node) && graph.ina_capable(node)) switches.insert(id);
  };
  for (const core::FlowPlan& flow : job.flows) add(flow.aggregation_node);
  for (const core::AggregatorPlan& agg : job.aggregator_paths) add(agg.switch_id);
  return {switches.begin(), switches.end()};
}

namespace {

// The plan's path from `switch_id` to `ps`: its aggregator path toward `ps` and, while that ends
// at a parent that re-aggregates it (a chain), on through the parent's own path, until the PS.
// Empty when the switch has no aggregator path or the chain does not reach the PS.
std::vector<std::string> PathToPs(const core::JobPlan& job, const std::string& switch_id,
                                  const std::string& ps) {
  std::vector<std::string> path;
  std::string at = switch_id;
  for (size_t hop = 0; hop <= job.aggregator_paths.size(); ++hop) {
    const core::AggregatorPlan* next = nullptr;
    for (const core::AggregatorPlan& agg : job.aggregator_paths) {
      if (agg.switch_id == at && agg.ps == ps && agg.path.size() >= 2 && agg.path.front() == at) {
        next = &agg;
        break;
      }
    }
    if (next == nullptr) return {};
    path.insert(path.end(), path.empty() ? next->path.begin() : next->path.begin() + 1,
                next->path.end());
    if (path.back() == ps) return path;
    at = path.back();
  }
  return {};  // a cycle of aggregator paths
}

// `walk` with its cycles cut out (a node visited twice: everything between the two visits
// dropped), so a re-pointed flow never loops; consecutive nodes stay adjacent.
void CutCycles(std::vector<std::string>* walk) {
  std::vector<std::string> out;
  std::unordered_map<std::string, size_t> at;
  for (const std::string& node : *walk) {
    auto it = at.find(node);
    if (it != at.end()) {
      for (size_t k = it->second + 1; k < out.size(); ++k) at.erase(out[k]);
      out.resize(it->second + 1);
      continue;
    }
    at[node] = out.size();
    out.push_back(node);
  }
  *walk = std::move(out);
}

}  // namespace

void FallBackToPs(const core::Graph& graph, const std::string& switch_id, core::JobPlan* job) {
  for (core::FlowPlan& flow : job->flows) {
    if (flow.aggregation_node != switch_id) continue;
    std::vector<std::string> tail = PathToPs(*job, switch_id, flow.ps);
    if (tail.empty()) tail = FewestHopPath(graph, switch_id, flow.ps);
    if (flow.path.empty() || flow.path.back() != switch_id) flow.path.push_back(switch_id);
    flow.path.insert(flow.path.end(), tail.empty() ? tail.end() : tail.begin() + 1, tail.end());
    CutCycles(&flow.path);
    flow.aggregation_node = flow.ps;
  }
  for (const core::AggregatorPlan& own : job->aggregator_paths) {
    if (own.switch_id != switch_id || own.path.size() < 2) continue;
    for (core::AggregatorPlan& child : job->aggregator_paths) {
      if (child.switch_id == switch_id || child.ps != own.ps || child.path.empty() ||
          child.path.back() != switch_id) {
        continue;
      }
      child.path.insert(child.path.end(), own.path.begin() + 1, own.path.end());
      CutCycles(&child.path);
    }
  }
  std::erase_if(job->aggregator_paths,
                [&](const core::AggregatorPlan& agg) { return agg.switch_id == switch_id; });
}

namespace {

// Jobs ranked by priority (desc, then id): the ids, and for each whether it ties the previous one.
std::vector<std::pair<core::JobId, bool>> PriorityOrder(const core::Plan& plan) {
  std::vector<const core::JobPlan*> ranked;
  for (const core::JobPlan& jp : plan.jobs) {
    if (jp.ring.empty()) ranked.push_back(&jp);
  }
  std::sort(ranked.begin(), ranked.end(), [](const core::JobPlan* a, const core::JobPlan* b) {
    return a->priority != b->priority ? a->priority > b->priority : a->job_id < b->job_id;
  });
  std::vector<std::pair<core::JobId, bool>> order;
  for (size_t i = 0; i < ranked.size(); ++i) {
    order.emplace_back(ranked[i]->job_id, i > 0 && ranked[i]->priority == ranked[i - 1]->priority);
  }
  return order;
}

}  // namespace

bool RefreshPriorities(const std::vector<MemoryJobState>& jobs, const PriorityFunction* priority,
                       core::Plan* plan) {
  const ShortestRemainingWorkWithAging default_priority;
  const PriorityFunction& priority_fn = priority != nullptr ? *priority : default_priority;
  std::map<core::JobId, const MemoryJobState*> state_of;
  for (const MemoryJobState& s : jobs) state_of[s.id] = &s;
  const auto before = PriorityOrder(*plan);
  for (core::JobPlan& jp : plan->jobs) {
    auto it = state_of.find(jp.job_id);
    if (!jp.ring.empty() || it == state_of.end()) continue;
    jp.priority =
        priority_fn.Priority(PriorityInput{.user_priority = it->second->user_priority,
                                           .remaining_comm_bytes = it->second->remaining_comm_bytes,
                                           .age_s = it->second->age_s});
  }
  return PriorityOrder(*plan) != before;
}

void AssignRingAggregators(const core::Graph& graph, const std::vector<core::Job>& jobs,
                           const MemoryPlannerOptions& options, core::Plan* plan) {
  if (options.policy == MemoryPolicy::kNoIna) return;
  std::map<std::string, int64_t> used;  // switch -> aggregators granted so far
  for (const core::JobPlan& jp : plan->jobs) {
    if (!jp.ring.empty()) continue;
    for (const auto& [sw, n] : jp.aggregators) used[sw] += n;
  }
  std::map<core::JobId, const core::Job*> job_of;
  for (const core::Job& j : jobs) job_of[j.id] = &j;
  std::vector<core::JobPlan*> rings;
  for (core::JobPlan& jp : plan->jobs) {
    if (!jp.ring.empty() && job_of.count(jp.job_id)) rings.push_back(&jp);
  }
  std::sort(rings.begin(), rings.end(), [&](const core::JobPlan* a, const core::JobPlan* b) {
    const int pa = job_of.at(a->job_id)->spec.priority, pb = job_of.at(b->job_id)->spec.priority;
    return pa != pb ? pa > pb : a->job_id < b->job_id;
  });
  for (core::JobPlan* jp : rings) {
    const core::Job& job = *job_of.at(jp->job_id);
    jp->aggregators.clear();
    const double line_rate = WorkerLineRateGbps(graph, job.spec.workers);
    for (const core::RingRackPlan& rack : core::RingRacksOf(*jp)) {
      const int node = graph.index(rack.tor);
      if (rack.workers.empty() || node < 0 || !graph.is_switch(node) || !graph.ina_capable(node)) {
        continue;
      }
      const int bytes = std::max(1, graph.topology().switches[node].ina.aggregator_bytes);
      const int64_t whole = (job.spec.gradient_bytes + bytes - 1) / bytes;
      const int64_t window =
          WindowAggregators(line_rate, GrantHoldUs(graph, *jp, rack.tor, options), bytes);
      const int64_t left = std::max<int64_t>(0, graph.aggregators(node) - used[rack.tor]);
      const int64_t grant = std::min(std::max(whole, window), left);
      if (grant <= 0) continue;
      jp->aggregators[rack.tor] += grant;
      used[rack.tor] += grant;
    }
  }
}

absl::Status AssignAggregators(const core::Graph& graph, const std::vector<MemoryJobState>& jobs,
                               const core::Plan* previous, const MemoryPlannerOptions& options,
                               core::Plan* plan) {
  std::unordered_map<core::JobId, const MemoryJobState*> state_of;
  for (const MemoryJobState& s : jobs) state_of[s.id] = &s;
  for (const core::JobPlan& jp : plan->jobs) {
    if (!state_of.contains(jp.job_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", jp.job_id, " is in the plan but has no memory state"));
    }
  }
  const ShortestRemainingWorkWithAging default_priority;
  const PriorityFunction& priority_fn =
      options.priority != nullptr ? *options.priority : default_priority;
  const auto allocator = MakeAllocator(options.policy);

  // Demands per switch, in plan order.
  struct Claim {
    size_t job_index;
    MemoryDemand demand;
    int64_t tags;  // the job's tags on the switch: a smaller grant leaves one without a window
    int64_t full;  // the window with the rounding spares (demand.window is without them)
  };
  std::map<std::string, std::vector<Claim>> claims;
  for (size_t i = 0; i < plan->jobs.size(); ++i) {
    core::JobPlan& jp = plan->jobs[i];
    const MemoryJobState& state = *state_of.at(jp.job_id);
    jp.priority =
        priority_fn.Priority(PriorityInput{.user_priority = state.user_priority,
                                           .remaining_comm_bytes = state.remaining_comm_bytes,
                                           .age_s = state.age_s});
    jp.aggregators.clear();
    // Windows are sized for the rate the routing planned (JobPlan::rate_gbps, evaluated before
    // memory), at most the workers' line rate: a memory-aware routing (trees charges each
    // switch's aggregators in its LP) then gets what its plan needs and no job's window takes
    // what another's plan counted on. A plan without a rate (0) asks for the line rate.
    const double line_rate_max = WorkerLineRateGbps(graph, state.workers);
    const double line_rate = jp.rate_gbps > 0 && std::isfinite(jp.rate_gbps)
                                 ? std::min(line_rate_max, jp.rate_gbps * (1 + kRateHeadroom))
                                 : line_rate_max;
    const core::JobPlan* before = previous != nullptr ? previous->FindJob(jp.job_id) : nullptr;
    // The job's tags on each switch, as the data plane programs them, and the part of each
    // worker's stream they carry there (sum of x_s * range length).
    std::map<std::string, std::vector<double>> tags_at;  // switch -> weight of each tag there
    const std::vector<core::JobTag> job_tags = core::JobTagsOf(graph, jp);
    for (const core::JobTag& tag : job_tags) {
      for (const std::string& sw : tag.switches) tags_at[sw].push_back(tag.weight);
    }
    // A tag has one window over its whole tree (core::DeriveSwitchIntents: slots line up along
    // a chain), the least of its shares there: every switch of a tag sizes it for the longest
    // hold among the tag's switches, so that the least share still carries the planned rate.
    std::map<std::string, double> hold_at;
    for (const std::string& sw : AggregatingSwitches(graph, jp)) {
      hold_at[sw] = GrantHoldUs(graph, jp, sw, options);
    }
    std::map<std::string, double> chain_hold = hold_at;
    for (const core::JobTag& tag : job_tags) {
      double longest = 0;
      for (const std::string& sw : tag.switches) {
        if (auto it = hold_at.find(sw); it != hold_at.end())
          longest = std::max(longest, it->second);
      }
      for (const std::string& sw : tag.switches) {
        if (auto it = chain_hold.find(sw); it != chain_hold.end()) {
          it->second = std::max(it->second, longest);
        }
      }
    }
    for (const std::string& sw : AggregatingSwitches(graph, jp)) {
      const int node = graph.index(sw);
      const int bytes = graph.topology().switches[node].ina.aggregator_bytes;
      const double hold = chain_hold.at(sw);
      // Per tag t its line-rate window n_t (plus one for rounding). The grant is split over the
      // tags in proportion to their weights (core::SplitGrant, rounding down), so the window
      // asked for is the least G whose proportional quota gives every tag its n_t
      // (max_t n_t · Σw / w_t), at most twice Σ n_t (a tiny tag must not inflate it further).
      const int64_t tags = static_cast<int64_t>(tags_at[sw].size());
      int64_t sum_need = 0;
      double weight_sum = 0;
      for (double weight : tags_at[sw]) {
        sum_need += WindowAggregators(line_rate * weight, hold, bytes) + 1;
        weight_sum += std::max(0.0, weight);
      }
      int64_t proportional = sum_need;
      for (double weight : tags_at[sw]) {
        if (weight <= 0 || weight_sum <= 0) continue;
        const int64_t need = WindowAggregators(line_rate * weight, hold, bytes) + 1;
        proportional = std::max<int64_t>(
            proportional, static_cast<int64_t>(
                              std::ceil(static_cast<double>(need) * weight_sum / weight - 1e-9)));
      }
      // One tag: its window, exactly (no split to round).
      const int64_t window = tags <= 1 ? WindowAggregators(line_rate * weight_sum, hold, bytes)
                                       : std::min(proportional, 2 * sum_need);
      // The base window: what the tags need at the rate, without the rounding spare. It is
      // granted first, to every job in the policy's order, so that a spare never takes what
      // another job's plan needs; the spares come from what is left (AssignAggregators below).
      const int64_t base =
          std::max(tags, tags <= 1 ? window : std::max<int64_t>(tags, sum_need - tags));
      MemoryDemand demand{.job_id = jp.job_id,
                          .window = std::min(std::max(tags, window), base),
                          .priority = jp.priority,
                          .admission = state.admission,
                          .held = 0};
      if (before != nullptr) {
        auto it = before->aggregators.find(sw);
        if (it != before->aggregators.end()) demand.held = it->second;
      }
      claims[sw].push_back(Claim{i, demand, tags, std::max(tags, window)});
    }
  }
  for (auto& [sw, list] : claims) {
    std::vector<MemoryDemand> demands;
    demands.reserve(list.size());
    for (const Claim& c : list) demands.push_back(c.demand);
    const int64_t capacity = graph.aggregators(graph.index(sw));
    std::vector<int64_t> grants = allocator->Allocate(capacity, demands);
    // Second pass: the rounding spares (up to each job's full window) from what is left, in the
    // same policy's order.
    int64_t left = capacity;
    for (int64_t g : grants) left -= g;
    if (left > 0) {
      std::vector<MemoryDemand> spares = demands;
      bool any = false;
      for (size_t k = 0; k < list.size(); ++k) {
        spares[k].window = grants[k] > 0 ? std::max<int64_t>(0, list[k].full - grants[k]) : 0;
        spares[k].held = 0;
        any |= spares[k].window > 0;
      }
      if (any) {
        const std::vector<int64_t> extra = allocator->Allocate(left, spares);
        for (size_t k = 0; k < list.size(); ++k) grants[k] += extra[k];
      }
    }
    for (size_t k = 0; k < list.size(); ++k) {
      core::JobPlan& jp = plan->jobs[list[k].job_index];
      if (grants[k] > 0 && grants[k] >= list[k].tags) {
        jp.aggregators[sw] = grants[k];
      } else if (options.fall_back_without_memory) {
        FallBackToPs(graph, sw, &jp);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace inac::scheduler
