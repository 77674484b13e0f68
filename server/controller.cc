#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/routing/routing_algorithm.h"
#include "spdlog/spdlog.h"

namespace inac::server {

int64_t SystemClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One managed switch: its client and what the loop knows about it.
struct Controller::SwitchSlot {
  core::Switch sw;
  std::mutex mu;  // serialises the loop's use of the client with status readers
  std::unique_ptr<southbound::SwitchClient> client;
  std::string factory_error;
  bool was_connected = false;
  bool needs_pipeline = true;
  // The session as last observed by the loop (after a visit, and by WatchSwitches between
  // passes): a change wakes the loop.
  bool seen_connected = false;
  bool seen_primary = false;
  // applied_version was confirmed by a reconciliation of this process (the stored value loaded at
  // start is only what the switch held when last seen; jobs advance on confirmed versions only).
  bool verified = false;
  // The state last written to storage (or loaded from it): a visit that changes nothing but the
  // contact time is not written again (each write is a durable transaction).
  std::optional<core::SwitchState> persisted;
  int64_t applied_version = 0;
  int64_t intent_version = 0;
  int64_t entries = 0;
  int64_t aggregators_used = 0;
  std::string last_error;
  int64_t last_contact_ms = 0;
  int64_t pipeline_pushes = 0;
  // Clock time of the last ReadCounters attempt (none yet: read at the next chance).
  std::optional<int64_t> counters_read_ms;

  // What status readers see: a copy published by the loop after each visit (readers never wait
  // for a reconciliation in progress).
  std::mutex published_mu;
  SwitchStatus published;

  void Publish() {
    std::lock_guard<std::mutex> lock(published_mu);
    published.intent_version = intent_version;
    published.applied_version = applied_version;
    published.last_error = last_error;
    published.last_contact_ms = last_contact_ms;
    published.pipeline_pushes = pipeline_pushes;
    published.entries = entries;
    published.aggregators_used = aggregators_used;
  }
};

namespace {

// A switch's stored contact time is refreshed at least this often even when nothing changed.
constexpr int64_t kContactRefreshMs = 60000;

core::Event MakeEvent(int64_t now, std::string kind, std::optional<core::JobId> job,
                      std::string message, std::string data = "{}") {
  core::Event e;
  e.time_ms = now;
  e.kind = std::move(kind);
  e.job_id = job;
  e.message = std::move(message);
  e.data_json = std::move(data);
  return e;
}

// Job ids that have at least one entry in `intent`.
std::set<core::JobId> JobsOf(const core::SwitchIntent& intent) {
  std::set<core::JobId> ids;
  for (const auto& j : intent.jobs) ids.insert(j.job_id);
  for (const auto& i : intent.inputs) ids.insert(i.job_id);
  for (const auto& r : intent.routes) ids.insert(r.job_id);
  for (const auto& g : intent.multicast_groups) ids.insert(g.job_id);
  return ids;
}

int64_t EntryCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

}  // namespace

Controller::Controller(core::Storage* storage, SwitchClientFactory factory, Clock clock,
                       ControllerOptions options)
    : storage_(storage),
      factory_(std::move(factory)),
      clock_(std::move(clock)),
      options_(std::move(options)) {}

Controller::~Controller() { Stop(); }

absl::Status Controller::Start() {
  auto algorithm = scheduler::MakeRoutingAlgorithm(options_.algorithm);
  if (!algorithm.ok()) return algorithm.status();
  if (!scheduler::ParseMemoryPolicy(options_.memory_policy)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown memory policy \"",
                                                   options_.memory_policy,
                                                   "\" (known: esa, atp, switchml, no_ina)"));
  }
  uint64_t election = options_.election_id;
  if (election == 0) {
    auto max = storage_->switch_states().MaxElectionId();
    if (!max.ok()) return max.status();
    election = *max + 1;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return absl::OkStatus();
    election_id_ = election;
    started_ = true;
    stopping_ = false;
    wake_ = true;
  }
  spdlog::info("event=controller_start algorithm={} memory_policy={} election_id={}",
               options_.algorithm, options_.memory_policy, election);
  Log("controller_started", std::nullopt,
      absl::StrCat("controller started with election id ", election));
  loop_ = std::thread([this] { LoopMain(); });
  return absl::OkStatus();
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
    started_ = false;
  }
  wake_cv_.notify_all();
  pass_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  std::map<std::string, std::shared_ptr<SwitchSlot>> slots;
  uint64_t election;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots.swap(slots_);
    election = election_id_;
  }
  std::vector<SwitchStateWrite> flush;
  for (auto& [id, slot] : slots) {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (slot->client) slot->client->Disconnect();
    if (auto write = StateWrite(slot, election, {}, true)) flush.push_back(std::move(*write));
  }
  PersistSwitchStates(std::move(flush));
  event_cv_.notify_all();
}

void Controller::Notify(Wake why) {
  (void)why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void Controller::Log(const std::string& kind, std::optional<core::JobId> job,
                     const std::string& message) {
  auto seq = storage_->events().Append(MakeEvent(clock_(), kind, job, message));
  if (!seq.ok())
    spdlog::warn("event=event_log_failed kind={} error=\"{}\"", kind, seq.status().ToString());
  event_cv_.notify_all();
}

bool Controller::WatchSwitches() {
  std::vector<std::shared_ptr<SwitchSlot>> slots;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, slot] : slots_) slots.push_back(slot);
  }
  bool changed = false;
  for (auto& slot : slots) {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (!slot->client) continue;
    bool connected = slot->client->IsConnected();
    bool primary = connected && slot->client->IsPrimary();
    if (connected == slot->seen_connected && primary == slot->seen_primary) continue;
    spdlog::debug("event=switch_session_changed switch={} connected={} primary={}", slot->sw.id,
                  connected, primary);
    changed = true;
    // A session seen down comes back as a new connection: the switch may have restarted empty,
    // so the next visit checks its pipeline before reconciling.
    if (!connected) slot->was_connected = false;
    slot->seen_connected = connected;
    slot->seen_primary = primary;
  }
  return changed;
}

void Controller::LoopMain() {
  constexpr auto kWatchPeriod = std::chrono::milliseconds(100);
  auto last_pass_end = std::chrono::steady_clock::now() - std::chrono::hours(1);  // quiet
  while (true) {
    {
      // Sleep until a wake-up or the timer; every kWatchPeriod look at the switches' sessions
      // (a switch that went down or came back, a primary change) and start a pass on a change.
      std::unique_lock<std::mutex> lock(mu_);
      auto timer = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timer_ms);
      while (!wake_ && !stopping_) {
        auto now = std::chrono::steady_clock::now();
        if (now >= timer) break;
        wake_cv_.wait_until(lock, std::min(timer, now + kWatchPeriod),
                            [this] { return wake_ || stopping_; });
        if (wake_ || stopping_) break;
        lock.unlock();
        bool changed = WatchSwitches();
        lock.lock();
        if (changed) wake_ = true;
      }
      if (stopping_) break;
      // Timer expiry and wake-ups both run a pass; debounce bursts of wake-ups.
    }
    // Debounce: a wake-up within `debounce_ms` of the end of the previous pass waits for the
    // rest of that window, so a burst of wake-ups shares one pass (those arriving during a pass
    // are served by the next one). A wake-up after a quiet period starts a pass at once.
    auto since_last = std::chrono::steady_clock::now() - last_pass_end;
    auto window = std::chrono::milliseconds(options_.debounce_ms);
    if (options_.debounce_ms > 0 && since_last < window) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_cv_.wait_for(lock, window - since_last, [this] { return stopping_; });
      if (stopping_) break;
    }
    int64_t pass_id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_ = false;
      pass_id = ++passes_started_;
    }
    Pass();
    {
      std::lock_guard<std::mutex> lock(mu_);
      passes_done_ = pass_id;
      metrics_.loop_passes++;
      metrics_.last_pass_ms = clock_();
    }
    last_pass_end = std::chrono::steady_clock::now();
    pass_cv_.notify_all();
  }
  pass_cv_.notify_all();
}

scheduler::PlannerOptions Controller::PlannerOptionsOf() const {
  scheduler::PlannerOptions o;
  o.algorithm = options_.algorithm;
  o.memory_policy = options_.memory_policy;
  o.seed = options_.seed;
  o.rounds = options_.rounds;
  o.paths = options_.paths;
  return o;
}

std::string Controller::Fingerprint(const core::Snapshot& snapshot) const {
  scheduler::PlanRequest request;
  request.topology_version = snapshot.topology ? snapshot.topology->version : 0;
  request.jobs = snapshot.jobs;
  request.options = PlannerOptionsOf();
  return scheduler::PlanFingerprint(request);
}

absl::StatusOr<core::Plan> Controller::ComputePlan(const core::Topology& topology,
                                                   const std::vector<core::Job>& jobs,
                                                   const core::Plan* previous, std::string* error) {
  scheduler::PlanRequest request;
  request.topology = &topology;
  request.jobs = jobs;
  request.previous = previous;
  request.now_ms = clock_();
  request.options = PlannerOptionsOf();
  auto out = scheduler::ComputePlan(request);
  if (!out.ok()) {
    *error = std::string(out.status().message());
    return out.status();
  }
  return std::move(out->plan);
}

absl::StatusOr<bool> Controller::RefreshPriorities(const core::Snapshot& snapshot,
                                                   int64_t* plan_version) {
  // ESA only: the other policies do not act on priorities in the data plane.
  if (options_.memory_policy != "esa" || !snapshot.plan || !snapshot.topology) return false;
  const int64_t now = clock_();
  std::vector<scheduler::MemoryJobState> states;
  for (const core::Job& job : snapshot.jobs) {
    if (snapshot.plan->plan.FindJob(job.id) != nullptr) {
      states.push_back(scheduler::MemoryJobStateFromJob(job, now));
    }
  }
  core::Plan plan = snapshot.plan->plan;
  if (!scheduler::RefreshPriorities(states, nullptr, &plan)) return false;
  plan.version = 0;  // next version; same routes, aggregators and fingerprint
  auto intents = core::DeriveSwitchIntents(snapshot.topology->topology, plan);
  auto version = storage_->plans().Save(
      plan, intents, now,
      {MakeEvent(now, "plan_saved", std::nullopt,
                 absl::StrCat("priorities refreshed from progress and age (plan ",
                              snapshot.plan->plan.version, " re-ranked, routes kept)"))});
  if (!version.ok()) return version.status();
  *plan_version = *version;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.priority_refreshes++;
  }
  spdlog::info("event=priorities_refreshed version={} jobs={}", *version, plan.jobs.size());
  event_cv_.notify_all();
  return true;
}

absl::StatusOr<bool> Controller::MaybeReplan(const core::Snapshot& snapshot,
                                             int64_t* plan_version) {
  std::string fingerprint = Fingerprint(snapshot);
  if (snapshot.plan && snapshot.plan->plan.fingerprint == fingerprint) {
    *plan_version = snapshot.plan->plan.version;
    // Saving a plan and marking its jobs scheduled are two transactions: after a crash between
    // them the plan is current but its jobs are still pending. Finish the second step (a pending
    // job is otherwise never in a current plan: unplaceable jobs are left out of it).
    std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
    std::vector<core::Event> events;
    int64_t now = clock_();
    for (const core::Job& job : snapshot.jobs) {
      if (job.state != core::JobState::kPending || !snapshot.plan->plan.FindJob(job.id)) continue;
      core::JobUpdate u;
      u.state = core::JobState::kScheduled;
      updates.push_back({job.id, u});
      events.push_back(MakeEvent(now, "job_scheduled", job.id,
                                 absl::StrCat("scheduled in plan ", *plan_version)));
    }
    if (!updates.empty()) {
      auto s = storage_->jobs().UpdateMany(updates, now, events);
      if (!s.ok()) spdlog::warn("event=job_update_failed error=\"{}\"", s.ToString());
      event_cv_.notify_all();
    }
    return RefreshPriorities(snapshot, plan_version);
  }
  const core::Topology& topology = snapshot.topology->topology;
  // Jobs that can be placed now: hosts present and connected over up links.
  std::vector<core::Job> placeable;
  std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
  std::vector<core::Event> events;
  int64_t now = clock_();
  for (const core::Job& job : snapshot.jobs) {
    auto problems = core::ValidateJobSpec(job.spec, &topology, "");
    if (problems.empty()) {
      placeable.push_back(job);
      continue;
    }
    bool missing_host = false;
    for (const auto& p : problems) missing_host |= p.kind == core::ProblemKind::kUnknownNode;
    if (missing_host) {
      core::JobUpdate u;
      u.state = core::JobState::kFailed;
      u.failure_reason = core::FormatProblems(problems);
      updates.push_back({job.id, u});
      events.push_back(MakeEvent(now, "job_failed", job.id, u.failure_reason->substr(0, 500)));
    } else if (job.state != core::JobState::kPending) {
      core::JobUpdate u;
      u.state = core::JobState::kPending;
      updates.push_back({job.id, u});
      events.push_back(MakeEvent(now, "job_unplaceable", job.id, core::FormatProblems(problems)));
    }
  }
  const core::Plan* previous = snapshot.plan ? &snapshot.plan->plan : nullptr;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  auto plan = ComputePlan(topology, placeable, previous, &error);
  double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    Log("plan_failed", std::nullopt, absl::StrCat("planning failed: ", error));
    spdlog::warn("event=plan_failed error=\"{}\"", error);
    if (!updates.empty()) {
      auto s = storage_->jobs().UpdateMany(updates, now, events);
      if (!s.ok()) spdlog::warn("event=job_update_failed error=\"{}\"", s.ToString());
    }
    return plan.status();
  }
  plan->solve_ms = solve_ms;
  plan->fingerprint = fingerprint;
  plan->version = 0;  // next version
  auto intents = core::DeriveSwitchIntents(topology, *plan);
  std::vector<core::Event> plan_events = {
      MakeEvent(now, "plan_saved", std::nullopt,
                absl::StrFormat("planned %d job(s) with %s in %.1f ms", plan->jobs.size(),
                                plan->algorithm, solve_ms))};
  auto version = storage_->plans().Save(*plan, intents, now, plan_events);
  if (!version.ok()) return version.status();
  *plan_version = *version;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.plans_computed++;
    metrics_.last_plan_ms = solve_ms;
    metrics_.plan_ms_sum += solve_ms;
  }
  spdlog::info("event=plan_saved version={} jobs={} solve_ms={:.1f}", *version, plan->jobs.size(),
               solve_ms);
  for (const core::Job& job : placeable) {
    if (job.state == core::JobState::kPending) {
      core::JobUpdate u;
      u.state = core::JobState::kScheduled;
      updates.push_back({job.id, u});
      events.push_back(
          MakeEvent(now, "job_scheduled", job.id, absl::StrCat("scheduled in plan ", *version)));
    }
  }
  if (!updates.empty()) {
    auto s = storage_->jobs().UpdateMany(updates, now, events);
    if (!s.ok()) spdlog::warn("event=job_update_failed error=\"{}\"", s.ToString());
  }
  storage_->plans().Prune(options_.keep_plans).IgnoreError();
  event_cv_.notify_all();
  return true;
}

void Controller::SyncSwitchSlots(const core::Topology& topology) {
  std::map<std::string, const core::Switch*> wanted;
  for (const core::Switch& sw : topology.switches) {
    if (sw.p4runtime) wanted[sw.id] = &sw;
  }
  std::vector<std::shared_ptr<SwitchSlot>> removed;
  uint64_t election;
  {
    std::lock_guard<std::mutex> lock(mu_);
    election = election_id_;
    for (auto it = slots_.begin(); it != slots_.end();) {
      auto w = wanted.find(it->first);
      if (w == wanted.end() || !(w->second->p4runtime == it->second->sw.p4runtime)) {
        removed.push_back(it->second);
        it = slots_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& slot : removed) {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (slot->client) slot->client->Disconnect();
    PruneCounters(slot->sw.id, nullptr);
  }
  for (const auto& [id, sw] : wanted) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (slots_.count(id)) continue;
    }
    auto slot = std::make_shared<SwitchSlot>();
    slot->sw = *sw;
    auto client = factory_(*sw, election);
    if (client.ok()) {
      slot->client = std::move(*client);
    } else {
      slot->factory_error = std::string(client.status().message());
      slot->last_error = slot->factory_error;
    }
    auto stored = storage_->switch_states().Get(id);
    if (stored.ok() && stored->has_value()) {
      slot->applied_version = (*stored)->applied_version;
      slot->last_contact_ms = (*stored)->last_contact_ms;
      slot->persisted = **stored;
    }
    slot->Publish();
    std::lock_guard<std::mutex> lock(mu_);
    slots_[id] = std::move(slot);
  }
}

std::vector<Controller::SwitchStateWrite> Controller::ReconcileAll(
    const core::Snapshot& snapshot, int64_t plan_version,
    const std::vector<core::SwitchIntent>& intents) {
  (void)snapshot;
  std::map<std::string, const core::SwitchIntent*> by_switch;
  for (const auto& intent : intents) by_switch[intent.switch_id] = &intent;
  std::vector<std::shared_ptr<SwitchSlot>> work;
  uint64_t election;
  {
    std::lock_guard<std::mutex> lock(mu_);
    election = election_id_;
    for (auto& [id, slot] : slots_) work.push_back(slot);
  }
  std::atomic<size_t> next{0};
  std::atomic<int64_t> writes{0}, errors{0}, runs{0};
  std::atomic<int64_t> micros{0};
  std::mutex writes_mu;
  std::vector<SwitchStateWrite> state_writes;
  auto worker = [&] {
    while (true) {
      size_t i = next++;
      if (i >= work.size()) return;
      SwitchSlot& slot = *work[i];
      std::lock_guard<std::mutex> lock(slot.mu);
      core::SwitchIntent empty;
      empty.switch_id = slot.sw.id;
      empty.version = plan_version;
      auto it = by_switch.find(slot.sw.id);
      const core::SwitchIntent& intent = it != by_switch.end() ? *it->second : empty;
      slot.intent_version = plan_version;
      slot.entries = EntryCount(intent);
      int64_t used = 0;
      for (const auto& j : intent.jobs) used += j.aggregator_count;
      slot.aggregators_used = used;
      PruneCounters(slot.sw.id, &intent);
      if (!slot.client) {
        slot.Publish();
        continue;
      }
      int64_t now = clock_();
      std::string error;
      bool applied = false;
      std::vector<core::Event> events;  // written with the switch's state
      absl::Status connected = slot.client->Connect();
      if (!connected.ok() || !slot.client->IsConnected()) {
        error = connected.ok() ? "not connected" : std::string(connected.message());
        slot.was_connected = false;
        slot.needs_pipeline = true;
      } else {
        if (!slot.was_connected) {
          slot.was_connected = true;
          slot.needs_pipeline = true;
          events.push_back(
              MakeEvent(now, "switch_connected", std::nullopt,
                        absl::StrCat("switch ", slot.sw.id, " connected (",
                                     slot.client->IsPrimary() ? "primary" : "backup", ")")));
        }
        slot.last_contact_ms = now;
        if (!slot.client->IsPrimary()) {
          error = "backup: another controller is primary";
        } else {
          // Checks the pipeline cookie and pushes the pipeline when it is missing or different.
          auto ensure_pipeline = [&]() -> bool {
            auto pushed = slot.client->EnsurePipeline();
            if (!pushed.ok()) {
              error = absl::StrCat("pipeline: ", pushed.status().message());
              slot.needs_pipeline = true;
              return false;
            }
            slot.needs_pipeline = false;
            if (*pushed) {
              slot.pipeline_pushes++;
              spdlog::info("event=pipeline_pushed switch={}", slot.sw.id);
              events.push_back(MakeEvent(now, "pipeline_pushed", std::nullopt,
                                         absl::StrCat("pushed the INA pipeline to ", slot.sw.id)));
            }
            return true;
          };
          bool ok = !slot.needs_pipeline || ensure_pipeline();
          if (ok) {
            auto start = std::chrono::steady_clock::now();
            auto stats = slot.client->Reconcile(intent);
            if (!stats.ok() && slot.client->IsConnected()) {
              // The switch may have lost its pipeline since the last pass (restarted between two
              // observations of the session), or holds the cookie without a working pipeline
              // (the client then re-pushes once): check it now and retry once, rather than a
              // timer period later.
              if (ensure_pipeline()) stats = slot.client->Reconcile(intent);
            }
            micros += std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
            runs++;
            if (!stats.ok()) {
              error = absl::StrCat("reconcile: ", stats.status().message());
              // A lost session or pipeline: check the pipeline again next time.
              slot.needs_pipeline = true;
            } else {
              // Outside the timed reconciliation; rate-limited per switch.
              MaybeReadCounters(slot, intent);
              writes += stats->writes();
              errors += stats->failed;
              if (stats->converged()) {
                applied = true;
              } else {
                error = stats->errors.empty() ? "some updates were refused" : stats->errors[0];
              }
              if (stats->writes() > 0) {
                spdlog::info(
                    "event=reconciled switch={} version={} inserted={} modified={} deleted={} "
                    "failed={}",
                    slot.sw.id, plan_version, stats->inserted, stats->modified, stats->deleted,
                    stats->failed);
              }
            }
          }
        }
      }
      if (!error.empty() && error != slot.last_error) {
        errors++;
        spdlog::warn("event=switch_error switch={} error=\"{}\"", slot.sw.id, error);
        events.push_back(
            MakeEvent(now, "switch_error", std::nullopt, absl::StrCat(slot.sw.id, ": ", error)));
      }
      slot.last_error = error;
      if (applied) {
        slot.applied_version = plan_version;
        slot.verified = true;
      }
      slot.seen_connected = slot.client->IsConnected();
      slot.seen_primary = slot.client->IsPrimary();
      slot.Publish();
      if (auto write = StateWrite(work[i], election, std::move(events), false)) {
        std::lock_guard<std::mutex> l(writes_mu);
        state_writes.push_back(std::move(*write));
      }
    }
  };
  int threads = std::max(1, std::min<int>(options_.reconcile_parallelism, work.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.reconcile_runs += runs;
  metrics_.southbound_writes += writes;
  metrics_.southbound_errors += errors;
  if (runs > 0) {
    metrics_.reconcile_ms_sum += micros / 1000.0;
    metrics_.last_reconcile_ms = micros / 1000.0 / runs;
  }
  return state_writes;
}

void Controller::MaybeReadCounters(SwitchSlot& slot, const core::SwitchIntent& intent) {
  bool any =
      std::any_of(intent.jobs.begin(), intent.jobs.end(),
                  [](const core::JobAggregationIntent& j) { return j.multicast_group != 0; });
  if (!any) return;
  int64_t now = clock_();
  if (slot.counters_read_ms && now >= *slot.counters_read_ms &&
      now - *slot.counters_read_ms < options_.counters_period_ms) {
    return;
  }
  slot.counters_read_ms = now;
  auto read = slot.client->ReadCounters(intent);
  if (!read.ok()) {
    // Counters are informational: a failed read never fails the visit; the samples of the last
    // successful read stay (their read_ms tells their age).
    spdlog::debug("event=counters_read_failed switch={} error=\"{}\"", slot.sw.id,
                  read.status().ToString());
    return;
  }
  std::lock_guard<std::mutex> lock(counters_mu_);
  auto& samples = counters_[slot.sw.id];
  for (const southbound::AggregationCounters& c : *read) {
    InaCounterSample& sample = samples[c.tag];
    sample.switch_id = slot.sw.id;
    sample.tag = c.tag;
    sample.job_id = c.job_id;
    sample.aggregated_packets = c.aggregated.packets;
    sample.fallback_packets = c.fallback.packets;
    sample.preempted_packets = c.preempted.packets;
    sample.read_ms = now;
  }
}

void Controller::PruneCounters(const std::string& switch_id, const core::SwitchIntent* intent) {
  std::lock_guard<std::mutex> lock(counters_mu_);
  auto it = counters_.find(switch_id);
  if (it == counters_.end()) return;
  if (intent != nullptr) {
    std::set<uint32_t> tags;
    for (const auto& j : intent->jobs) {
      if (j.multicast_group != 0) tags.insert(j.tag);
    }
    std::erase_if(it->second, [&](const auto& entry) { return !tags.count(entry.first); });
  }
  if (intent == nullptr || it->second.empty()) counters_.erase(it);
}

std::optional<Controller::SwitchStateWrite> Controller::StateWrite(
    const std::shared_ptr<SwitchSlot>& slot, uint64_t election, std::vector<core::Event> events,
    bool flush) {
  core::SwitchState state;
  state.switch_id = slot->sw.id;
  state.applied_version = slot->applied_version;
  state.last_error = slot->last_error;
  state.last_contact_ms = slot->last_contact_ms;
  state.election_id = election;
  const auto& old = slot->persisted;
  // Written at once: a first record, an error or election change, events to log.
  bool now = !old || old->last_error != state.last_error || old->election_id != state.election_id ||
             !events.empty();
  // A new applied version alone (every switch, on every new plan) is written at most once per
  // timer period, by the first pass after it (or at Stop): the record is informational (jobs
  // advance on versions confirmed in memory; a restart reads the switches back), and one durable
  // transaction per switch per pass would compete with job submissions for the writer.
  int64_t age = old ? state.last_contact_ms - old->last_contact_ms : 0;
  bool dirty = old && old->applied_version != state.applied_version;
  bool later = dirty && (flush || age >= options_.timer_ms);
  if (!now && !later && age <= kContactRefreshMs) return std::nullopt;
  return SwitchStateWrite{slot, std::move(state), std::move(events)};
}

void Controller::PersistSwitchStates(std::vector<SwitchStateWrite> writes) {
  for (SwitchStateWrite& w : writes) {
    auto s = storage_->switch_states().Put(w.state, w.events);
    if (!s.ok()) {
      spdlog::warn("event=switch_state_save_failed switch={} error=\"{}\"", w.state.switch_id,
                   s.ToString());
      continue;
    }
    std::lock_guard<std::mutex> lock(w.slot->mu);
    w.slot->persisted = std::move(w.state);
  }
  if (!writes.empty()) event_cv_.notify_all();
}

void Controller::AdvanceJobs(int64_t plan_version, const std::vector<core::SwitchIntent>& intents) {
  auto active = storage_->jobs().List(core::JobFilter{{core::JobState::kScheduled}, {}, 0, 100000});
  if (!active.ok() || active->jobs.empty()) return;
  std::map<std::string, int64_t> applied;
  std::map<std::string, bool> managed;
  std::map<std::string, std::shared_ptr<SwitchSlot>> slots;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots = slots_;
  }
  for (auto& [id, slot] : slots) {
    std::lock_guard<std::mutex> slot_lock(slot->mu);
    applied[id] = slot->verified ? slot->applied_version : 0;
    managed[id] = true;
  }
  std::map<core::JobId, bool> ready;
  for (const core::Job& job : active->jobs) ready[job.id] = true;
  for (const auto& intent : intents) {
    bool ok = managed.count(intent.switch_id) == 0 ||  // unmanaged switches need nothing
              applied[intent.switch_id] >= plan_version;
    if (ok) continue;
    for (core::JobId id : JobsOf(intent)) {
      if (ready.count(id)) ready[id] = false;
    }
  }
  std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
  std::vector<core::Event> events;
  int64_t now = clock_();
  for (const auto& [id, ok] : ready) {
    if (!ok) continue;
    core::JobUpdate u;
    u.state = core::JobState::kRunning;
    updates.push_back({id, u});
    events.push_back(MakeEvent(now, "job_running", id,
                               absl::StrCat("every switch applied plan ", plan_version)));
  }
  if (updates.empty()) return;
  auto s = storage_->jobs().UpdateMany(updates, now, events);
  if (!s.ok()) spdlog::warn("event=job_update_failed error=\"{}\"", s.ToString());
  event_cv_.notify_all();
}

void Controller::Pass() {
  using Steady = std::chrono::steady_clock;
  auto ms = [](Steady::time_point a, Steady::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  auto t0 = Steady::now();
  auto snapshot = storage_->ReadSnapshot();
  if (!snapshot.ok()) {
    spdlog::error("event=snapshot_failed error=\"{}\"", snapshot.status().ToString());
    return;
  }
  if (!snapshot->topology) return;  // nothing to control yet
  SyncSwitchSlots(snapshot->topology->topology);
  auto t1 = Steady::now();
  int64_t plan_version = 0;
  auto replanned = MaybeReplan(*snapshot, &plan_version);
  if (!replanned.ok() && plan_version == 0) {
    if (!snapshot->plan) return;
    plan_version = snapshot->plan->plan.version;  // keep driving the last good plan
  }
  std::vector<core::SwitchIntent> intents;
  if (plan_version == (snapshot->plan ? snapshot->plan->plan.version : -1)) {
    intents = snapshot->intents;
  } else {
    auto loaded = storage_->plans().Intents(plan_version);
    if (!loaded.ok()) {
      spdlog::error("event=intents_load_failed version={} error=\"{}\"", plan_version,
                    loaded.status().ToString());
      return;
    }
    intents = std::move(*loaded);
  }
  auto t2 = Steady::now();
  auto state_writes = ReconcileAll(*snapshot, plan_version, intents);
  auto t3 = Steady::now();
  // Jobs first: a job's switches are confirmed in memory; the per-switch records (one durable
  // transaction each) are informational and follow.
  AdvanceJobs(plan_version, intents);
  auto t4 = Steady::now();
  size_t states = state_writes.size();
  PersistSwitchStates(std::move(state_writes));
  storage_->events().Trim(options_.keep_events).IgnoreError();
  auto t5 = Steady::now();
  spdlog::debug(
      "event=pass plan_version={} replanned={} snapshot_ms={:.1f} plan_ms={:.1f} "
      "reconcile_ms={:.1f} advance_ms={:.1f} persist_ms={:.1f} switch_states_written={}",
      plan_version, replanned.ok() && *replanned, ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4),
      ms(t4, t5), states);
}

absl::Status Controller::Sync(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) return absl::FailedPreconditionError("controller is not running");
  int64_t target = passes_started_ + 1;
  wake_ = true;
  wake_cv_.notify_one();
  bool done = pass_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [&] { return passes_done_ >= target || stopping_; });
  if (!done) return absl::DeadlineExceededError("controller pass did not finish in time");
  return absl::OkStatus();
}

// ------------------------------------------------------------------------------------------------
// Commands

absl::StatusOr<core::CreateJobResult> Controller::SubmitJob(
    const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) {
  auto topology = storage_->topology().Get();
  if (!topology.ok()) return topology.status();
  const core::Topology* topo = topology->has_value() ? &(*topology)->topology : nullptr;
  auto problems = core::ValidateJobSpec(spec, topo, "");
  if (!problems.empty()) {
    return core::ProblemsError(problems);
  }
  int64_t now = clock_();
  auto result = storage_->jobs().Create(
      spec, now, idempotency,
      {MakeEvent(now, "job_submitted", std::nullopt,
                 absl::StrCat("job \"", spec.name, "\" submitted by tenant ", spec.tenant))});
  if (result.ok()) {
    event_cv_.notify_all();
    if (result->created) Notify(Wake::kJobs);
  }
  return result;
}

absl::StatusOr<core::Job> Controller::CancelJob(core::JobId id) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  // The store treats cancelled -> cancelled as a no-op; the contract is FailedPrecondition for
  // every terminal job (and no second job_cancelled event).
  if (core::IsTerminal(job->state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", std::string(core::JobStateName(job->state))));
  }
  core::JobUpdate u;
  u.state = core::JobState::kCancelled;
  int64_t now = clock_();
  auto updated =
      storage_->jobs().Update(id, u, now, {MakeEvent(now, "job_cancelled", id, "cancelled")});
  if (updated.ok()) {
    event_cv_.notify_all();
    Notify(Wake::kJobs);
  }
  return updated;
}

absl::StatusOr<core::Job> Controller::ReportProgress(core::JobId id, int64_t iterations_done,
                                                     std::optional<double> loss) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  if (job->state != core::JobState::kScheduled && job->state != core::JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(core::JobStateName(job->state)),
                     "; progress is accepted only while it is scheduled or running"));
  }
  if (iterations_done < job->iterations_done) {
    return core::WithField(
        absl::InvalidArgumentError(absl::StrCat("iterations_done: went backwards (",
                                                iterations_done, " < ", job->iterations_done, ")")),
        "iterations_done");
  }
  if (iterations_done > job->spec.iterations) {
    return core::WithField(absl::InvalidArgumentError(absl::StrCat(
                               "iterations_done: ", iterations_done, " exceeds the job's ",
                               job->spec.iterations, " iterations")),
                           "iterations_done");
  }
  int64_t now = clock_();
  core::JobUpdate u;
  u.iterations_done = iterations_done;
  u.loss = loss;
  bool done = iterations_done == job->spec.iterations;
  if (!done) {
    return storage_->jobs().Update(id, u, now);
  }
  std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
  if (job->state == core::JobState::kScheduled) {
    core::JobUpdate run;
    run.state = core::JobState::kRunning;
    updates.push_back({id, run});
  }
  u.state = core::JobState::kCompleted;
  updates.push_back({id, u});
  auto s = storage_->jobs().UpdateMany(
      updates, now,
      {MakeEvent(now, "job_completed", id,
                 absl::StrCat("completed after ", iterations_done, " iterations"))});
  if (!s.ok()) return s;
  event_cv_.notify_all();
  Notify(Wake::kJobs);
  return storage_->jobs().Get(id);
}

absl::StatusOr<int64_t> Controller::PutTopology(const core::Topology& topology) {
  auto problems = core::ValidateTopology(topology);
  if (!problems.empty()) return core::ProblemsError(problems);
  int64_t now = clock_();
  auto version = storage_->topology().Put(
      topology, now, std::nullopt,
      {MakeEvent(now, "topology_changed", std::nullopt,
                 absl::StrFormat("topology replaced: %d switches, %d hosts, %d links",
                                 topology.switches.size(), topology.hosts.size(),
                                 topology.links.size()))});
  if (version.ok()) {
    event_cv_.notify_all();
    Notify(Wake::kTopology);
  }
  return version;
}

absl::StatusOr<core::Link> Controller::SetLinkStatus(const std::string& link_id,
                                                     core::LinkStatus status) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto record = storage_->topology().Get();
    if (!record.ok()) return record.status();
    if (!record->has_value()) return absl::NotFoundError("no topology has been loaded");
    core::Topology topology = (*record)->topology;
    core::Link* link = topology.FindLink(link_id);
    if (!link) return absl::NotFoundError(absl::StrCat("unknown link \"", link_id, "\""));
    if (link->status == status) return *link;
    link->status = status;
    core::Link result = *link;
    int64_t now = clock_();
    auto version = storage_->topology().Put(
        topology, now, (*record)->version,
        {MakeEvent(
            now, status == core::LinkStatus::kDown ? "link_down" : "link_up", std::nullopt,
            absl::StrCat("link ", link_id, " set ", std::string(core::LinkStatusName(status))))});
    if (version.ok()) {
      event_cv_.notify_all();
      Notify(Wake::kTopology);
      return result;
    }
    if (version.status().code() != absl::StatusCode::kFailedPrecondition) return version.status();
  }
  return absl::UnavailableError("topology changed concurrently; try again");
}

// ------------------------------------------------------------------------------------------------
// Queries

absl::StatusOr<std::optional<core::TopologyRecord>> Controller::GetTopology() {
  return storage_->topology().Get();
}

absl::StatusOr<core::Job> Controller::GetJob(core::JobId id) { return storage_->jobs().Get(id); }

absl::StatusOr<core::JobPage> Controller::ListJobs(const core::JobFilter& filter) {
  return storage_->jobs().List(filter);
}

absl::StatusOr<std::optional<core::PlanRecord>> Controller::CurrentPlan() {
  return storage_->plans().Latest();
}

absl::StatusOr<JobConfig> Controller::GetJobConfig(core::JobId id) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  JobConfig config;
  config.job = *job;
  config.batch_size = job->spec.batch_size;
  config.priority = job->spec.priority;
  auto plan = storage_->plans().Latest();
  if (!plan.ok()) return plan.status();
  if (!plan->has_value()) return config;
  const core::Plan& p = (*plan)->plan;
  const core::JobPlan* jp = p.FindJob(id);
  if (!jp) return config;
  config.plan_version = p.version;
  config.generation = jp->generation;
  config.algorithm = p.algorithm;
  config.batch_size = jp->batch_size;
  config.priority = jp->priority;
  config.rate_gbps = jp->rate_gbps;
  config.iteration_ms = jp->iteration_ms;
  config.ring = jp->ring;
  auto topology = storage_->topology().Get();
  if (!topology.ok()) return topology.status();
  auto intents = storage_->plans().Intents(p.version);
  if (!intents.ok()) return intents.status();
  int ps_index = 0;
  for (const auto& [ps, share] : jp->ps_shares) {
    JobConfig::Shard shard;
    shard.ps = ps;
    shard.share = share;
    shard.tag = core::AggregationTag(id, ps_index++, 0, jp->generation);
    if (topology->has_value()) shard.ps_address = core::NodeAddress((*topology)->topology, ps);
    for (const auto& intent : *intents) {
      for (const auto& g : intent.jobs) {
        if (g.tag == shard.tag && g.multicast_group) shard.multicast_group = g.multicast_group;
      }
      for (const auto& r : intent.routes) {
        if (r.tag == shard.tag && r.multicast_group) shard.multicast_group = r.multicast_group;
      }
    }
    config.shards.push_back(shard);
  }
  for (const auto& f : jp->flows) {
    config.routes.push_back({f.worker, f.ps, f.aggregation_node, f.fraction});
  }
  for (const auto& intent : *intents) {
    for (const auto& g : intent.jobs) {
      if (g.job_id == id) {
        config.regions.push_back({intent.switch_id, g.tag, g.aggregator_base, g.aggregator_count,
                                  g.slot_offset, g.window});
      }
    }
  }
  if (!topology->has_value()) return config;
  const core::Topology& t = (*topology)->topology;
  std::map<uint32_t, std::string> node_of;  // address -> node id
  for (const core::Host& h : t.hosts) node_of[core::NodeAddress(t, h.id)] = h.id;
  for (const core::Switch& sw : t.switches) node_of[core::NodeAddress(t, sw.id)] = sw.id;
  ps_index = 0;
  for (const auto& [ps, share] : jp->ps_shares) {
    for (const core::ChunkRange& range : core::ChunkRangesOf(*jp, ps)) {
      JobConfig::Tag tag;
      tag.tag = core::AggregationTag(id, ps_index, range.index, jp->generation);
      tag.ps = ps;
      tag.ps_address = core::NodeAddress(t, ps);
      tag.share = share;
      tag.begin = range.begin;
      tag.end = range.end;
      for (const core::FlowPlan* f : range.flows) {
        tag.members.push_back({f->worker, core::NodeAddress(t, f->worker), f->aggregation_node});
      }
      for (const auto& intent : *intents) {
        for (const auto& g : intent.jobs) {
          if (g.tag != tag.tag) continue;
          tag.multicast_group = g.multicast_group;
          JobConfig::Tag::Aggregator agg;
          agg.switch_id = intent.switch_id;
          agg.address = g.self_address;
          agg.inputs.resize(g.fan_in);
          for (const auto& in : intent.inputs) {
            if (in.tag == tag.tag && in.index < agg.inputs.size()) {
              auto node = node_of.find(in.source_address);
              agg.inputs[in.index] =
                  node != node_of.end() ? node->second : core::FormatIpv4(in.source_address);
            }
          }
          agg.aggregator_base = g.aggregator_base;
          agg.aggregator_count = g.aggregator_count;
          agg.slot_offset = g.slot_offset;
          agg.window = g.window;
          tag.aggregators.push_back(std::move(agg));
        }
        for (const auto& r : intent.routes) {
          if (r.tag == tag.tag && r.multicast_group) tag.multicast_group = r.multicast_group;
        }
      }
      config.tags.push_back(std::move(tag));
    }
    ++ps_index;
  }
  return config;
}

absl::StatusOr<core::Plan> Controller::PreviewPlan(const core::JobSpec& spec) {
  auto snapshot = storage_->ReadSnapshot();
  if (!snapshot.ok()) return snapshot.status();
  if (!snapshot->topology) return absl::FailedPreconditionError("no topology has been loaded");
  const core::Topology& topology = snapshot->topology->topology;
  auto problems = core::ValidateJobSpec(spec, &topology, "");
  if (!problems.empty()) return core::ProblemsError(problems);
  std::vector<core::Job> jobs;
  for (const core::Job& job : snapshot->jobs) {
    if (core::ValidateJobSpec(job.spec, &topology, "").empty()) jobs.push_back(job);
  }
  core::Job candidate;
  candidate.id = 0;
  for (const core::Job& job : snapshot->jobs) candidate.id = std::max(candidate.id, job.id);
  candidate.id += 1000000;  // an id no stored job has
  candidate.spec = spec;
  candidate.created_ms = clock_();
  jobs.push_back(candidate);
  std::string error;
  const core::Plan* previous = snapshot->plan ? &snapshot->plan->plan : nullptr;
  auto start = std::chrono::steady_clock::now();
  auto plan = ComputePlan(topology, jobs, previous, &error);
  if (!plan.ok()) return plan.status();
  plan->solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (core::JobPlan& jp : plan->jobs) {
    if (jp.job_id == candidate.id) jp.job_id = 0;
  }
  return plan;
}

std::vector<SwitchStatus> Controller::Switches() {
  std::vector<SwitchStatus> out;
  auto record = storage_->topology().Get();
  std::map<std::string, std::shared_ptr<SwitchSlot>> slots;
  uint64_t election;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots = slots_;
    election = election_id_;
  }
  auto states = storage_->switch_states().List();
  std::map<std::string, core::SwitchState> stored;
  if (states.ok()) {
    for (auto& s : *states) stored[s.switch_id] = s;
  }
  if (!record.ok() || !record->has_value()) return out;
  for (const core::Switch& sw : (*record)->topology.switches) {
    SwitchStatus st;
    st.id = sw.id;
    st.managed = sw.p4runtime.has_value();
    if (sw.p4runtime) {
      st.address = sw.p4runtime->address;
      st.device_id = sw.p4runtime->device_id;
      st.target = core::TargetKindName(sw.p4runtime->target);
    }
    st.aggregators_total = sw.ina.capable ? sw.ina.aggregators : 0;
    auto it = slots.find(sw.id);
    if (it != slots.end()) {
      SwitchSlot& slot = *it->second;
      {
        std::lock_guard<std::mutex> lock(slot.published_mu);
        st.intent_version = slot.published.intent_version;
        st.applied_version = slot.published.applied_version;
        st.last_error = slot.published.last_error;
        st.last_contact_ms = slot.published.last_contact_ms;
        st.pipeline_pushes = slot.published.pipeline_pushes;
        st.entries = slot.published.entries;
        st.aggregators_used = slot.published.aggregators_used;
      }
      // The client is set once at creation and its status calls are thread-safe.
      st.connected = slot.client && slot.client->IsConnected();
      st.primary = slot.client && slot.client->IsPrimary();
      st.election_id = election;
      if (!slot.factory_error.empty() && st.last_error.empty()) st.last_error = slot.factory_error;
    } else if (stored.count(sw.id)) {
      st.applied_version = stored[sw.id].applied_version;
      st.last_error = stored[sw.id].last_error;
      st.last_contact_ms = stored[sw.id].last_contact_ms;
    }
    out.push_back(std::move(st));
  }
  return out;
}

absl::StatusOr<SwitchStatus> Controller::GetSwitch(const std::string& id) {
  for (SwitchStatus& s : Switches()) {
    if (s.id == id) return s;
  }
  return absl::NotFoundError(absl::StrCat("unknown switch \"", id, "\""));
}

absl::StatusOr<std::vector<core::Event>> Controller::Events(const core::EventFilter& filter) {
  return storage_->events().List(filter);
}

int64_t Controller::WaitForEvents(int64_t after_seq, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(event_mu_);
  while (true) {
    auto last = storage_->events().LastSeq();
    int64_t seq = last.ok() ? *last : after_seq;
    if (seq > after_seq) return seq;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!started_) return seq;
    }
    if (event_cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                          std::chrono::milliseconds(200))) ==
            std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= deadline) {
      return seq;
    }
  }
}

bool Controller::LoopAlive() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) return false;
  if (metrics_.loop_passes == 0) return true;  // first pass still running
  return clock_() - metrics_.last_pass_ms < 5 * options_.timer_ms + 60000;
}

absl::Status Controller::Ready() {
  auto last = storage_->events().LastSeq();
  if (!last.ok())
    return absl::UnavailableError(absl::StrCat("database: ", last.status().message()));
  if (!LoopAlive()) return absl::UnavailableError("controller loop is not running");
  std::vector<std::string> down;
  for (const SwitchStatus& s : Switches()) {
    if (s.managed && !s.connected) down.push_back(s.id);
  }
  if (!down.empty()) {
    std::string list;
    for (size_t i = 0; i < down.size() && i < 10; ++i)
      absl::StrAppend(&list, i ? ", " : "", down[i]);
    return absl::UnavailableError(absl::StrCat(down.size(), " switch(es) unreachable: ", list));
  }
  return absl::OkStatus();
}

ControllerMetrics Controller::Metrics() {
  ControllerMetrics m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    m = metrics_;
  }
  auto counts = storage_->jobs().CountByState();
  if (counts.ok()) m.jobs_by_state = *counts;
  m.switches = Switches();
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    for (const auto& [id, samples] : counters_) {
      for (const auto& [tag, sample] : samples) m.ina_counters.push_back(sample);
    }
  }
  std::stable_sort(m.ina_counters.begin(), m.ina_counters.end(),
                   [](const InaCounterSample& a, const InaCounterSample& b) {
                     return a.job_id < b.job_id;  // switch and tag order kept from the map
                   });
  return m;
}

std::vector<InaCounterSample> Controller::JobCounters(core::JobId id) {
  std::vector<InaCounterSample> out;
  std::lock_guard<std::mutex> lock(counters_mu_);
  for (const auto& [switch_id, samples] : counters_) {
    for (const auto& [tag, sample] : samples) {
      if (sample.job_id == id) out.push_back(sample);
    }
  }
  return out;
}

}  // namespace inac::server
