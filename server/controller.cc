// The controller's lifecycle, its loop and pass, and the job state changes the loop makes
// (server/controller.h). Planning is controller_plan.cc, the refiner controller_refiner.cc, the
// services answered by the controller itself controller_services.cc.
#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "spdlog/spdlog.h"

namespace inac::server {
namespace {

// Job ids that have at least one entry in `intent`.
std::set<core::JobId> JobsOf(const core::SwitchIntent& intent) {
  std::set<core::JobId> ids;
  for (const auto& j : intent.jobs) ids.insert(j.job_id);
  for (const auto& i : intent.inputs) ids.insert(i.job_id);
  for (const auto& r : intent.routes) ids.insert(r.job_id);
  for (const auto& g : intent.multicast_groups) ids.insert(g.job_id);
  return ids;
}

SwitchFleetOptions FleetOptionsOf(const ControllerOptions& o) {
  SwitchFleetOptions f;
  f.parallelism = o.reconcile_parallelism;
  f.counters_period_ms = o.counters_period_ms;
  f.state_write_period_ms = o.timer_ms;
  return f;
}

}  // namespace

Controller::Controller(core::Storage* storage, SwitchClientFactory factory, Clock clock,
                       ControllerOptions options)
    : storage_(storage),
      clock_(std::move(clock)),
      options_(std::move(options)),
      events_(&storage->events(), clock_),
      fleet_(&storage->switch_states(), &events_, &metrics_, std::move(factory), clock_,
             FleetOptionsOf(options_)),
      jobs_(storage, &events_, &fleet_, &stats_, &data_paths_, &batch_refit_, clock_,
            [this] { Wake(); }),
      topology_(storage, &events_, &fleet_, clock_, [this] { Wake(); }),
      retention_(storage, &events_, &metrics_, clock_, options_.retention),
      stats_(options_.stats) {}

Controller::~Controller() { Stop(); }

ApiServices Controller::services() {
  ApiServices s;
  s.jobs = &jobs_;
  s.topology = &topology_;
  s.plans = this;
  s.events = this;
  s.health = this;
  s.audit = this;
  s.stats = &stats_;
  return s;
}

absl::Status Controller::Start() {
  auto algorithm = scheduler::MakeRoutingAlgorithm(options_.algorithm);
  if (!algorithm.ok()) return algorithm.status();
  if (!scheduler::ParseMemoryPolicy(options_.memory_policy)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown memory policy \"",
                                                   options_.memory_policy,
                                                   "\" (known: esa, atp, switchml, no_ina)"));
  }
  if (options_.retention.period_ms <= 0 || options_.retention.batch_rows <= 0 ||
      options_.retention.finished_jobs_ms < 0 || options_.retention.audit_ms < 0) {
    return absl::InvalidArgumentError(
        "retention: period and batch size must be positive, ages must not be negative");
  }
  southbound::ElectionId election = options_.election_id;
  if (election == southbound::ElectionId{}) {
    auto max = storage_->switch_states().MaxElectionId();
    if (!max.ok()) return max.status();
    election = southbound::ElectionId{0, *max + 1};
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::OkStatus();
    started_ = true;
    stopping_ = false;
    wake_ = true;
  }
  fleet_.SetElectionId(election);
  RestoreBatchRefit();
  events_.Open();
  spdlog::info("event=controller_start algorithm={} memory_policy={} election_id={}",
               options_.algorithm, options_.memory_policy, southbound::ToString(election));
  events_.Log("controller_started", std::nullopt,
              absl::StrCat("controller started with election id ", southbound::ToString(election)));
  {
    absl::MutexLock lock(&mu_);
    loop_exited_ = false;
    refiner_exit_ = false;
    refine_fingerprint_.clear();
    refine_request_.reset();
    refine_result_.reset();
  }
  if (options_.incremental) refiner_ = std::thread([this] { RefinerMain(); });
  loop_ = std::thread([this] {
    LoopMain();
    absl::MutexLock lock(&mu_);
    loop_exited_ = true;
  });
  retention_.Start();
  return absl::OkStatus();
}

void Controller::Stop() { StopWithin(absl::InfiniteDuration()); }

bool Controller::StopWithin(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (started_) {
      stopping_ = true;
      started_ = false;
    }
    // The loop leaves at its next check: between passes at once, inside a pass after its current
    // step (a plan being computed is not interrupted).
    // The refiner leaves after its current solve (bounded by replan_budget_ms of CLP); its
    // result is dropped (the next start refines the admission plan in force again).
    refiner_exit_ = true;
    auto exited = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return loop_exited_ && !refine_running_;
    };
    if ((loop_.joinable() || refiner_.joinable()) &&
        !mu_.AwaitWithTimeout(absl::Condition(&exited), grace)) {
      return false;
    }
  }
  retention_.Stop();
  if (loop_.joinable()) loop_.join();
  if (refiner_.joinable()) refiner_.join();
  fleet_.Shutdown();
  events_.Close();
  return true;
}

bool Controller::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void Controller::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void Controller::LoopMain() {
  constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);
  auto last_pass_end = std::chrono::steady_clock::now() - std::chrono::hours(1);  // quiet
  auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    {
      // Sleep until a wake-up or the timer; every kWatchPeriod look at the switches' sessions
      // (a switch that went down or came back, a primary change) and start a pass on a change.
      absl::MutexLock lock(&mu_);
      const absl::Time timer = absl::Now() + absl::Milliseconds(options_.timer_ms);
      while (!wake_ && !stopping_) {
        const absl::Time now = absl::Now();
        if (now >= timer) break;
        if (mu_.AwaitWithDeadline(absl::Condition(&woken), std::min(timer, now + kWatchPeriod))) {
          break;
        }
        mu_.Unlock();
        const bool changed = fleet_.Watch();
        mu_.Lock();
        if (changed) wake_ = true;
      }
      if (stopping_) break;
      // Timer expiry and wake-ups both run a pass.
    }
    // Debounce: a wake-up within `debounce_ms` of the end of the previous pass waits for the
    // rest of that window, so a burst of wake-ups shares one pass (those arriving during a pass
    // are served by the next one). A wake-up after a quiet period starts a pass at once.
    const auto since_last = std::chrono::steady_clock::now() - last_pass_end;
    const auto window = std::chrono::milliseconds(options_.debounce_ms);
    if (options_.debounce_ms > 0 && since_last < window) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::FromChrono(window - since_last));
      if (stopping_) break;
    }
    int64_t pass_id;
    {
      absl::MutexLock lock(&mu_);
      wake_ = false;
      pass_id = ++passes_started_;
    }
    const auto start = std::chrono::steady_clock::now();
    Pass();
    last_pass_end = std::chrono::steady_clock::now();
    const int64_t now = clock_();
    metrics_.ObservePass(std::chrono::duration<double>(last_pass_end - start).count(), now);
    absl::MutexLock lock(&mu_);
    passes_done_ = pass_id;
    last_pass_ms_ = now;
    if (refine_settle_at_pass_end_) {
      refine_settle_at_pass_end_ = false;
      refine_fingerprint_.clear();
    }
  }
}

void Controller::RestoreBatchRefit() {
  for (const char* kind : {"noise_scale_refit", "job_batch_size"}) {
    core::EventFilter filter;
    filter.kind = kind;
    filter.limit = 1000;
    while (true) {
      auto page = storage_->events().List(filter);
      if (!page.ok()) {
        spdlog::warn("event=batch_refit_restore_failed error=\"{}\"",
                     std::string(page.status().message()));
        return;
      }
      batch_refit_.Restore(*page);
      if (static_cast<int64_t>(page->size()) < filter.limit) break;
      filter.after_seq = page->back().seq;
    }
  }
}

void Controller::MarkScheduled(const core::Snapshot& snapshot, int64_t plan_version) {
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
    events.push_back(
        MakeEvent(now, "job_scheduled", job.id, absl::StrCat("scheduled in plan ", plan_version)));
  }
  if (!updates.empty()) ApplyJobUpdates(updates, events, now);
}

void Controller::AdvanceJobs(int64_t plan_version, const std::vector<core::SwitchIntent>& intents) {
  auto active = storage_->jobs().List(core::JobFilter{{core::JobState::kScheduled}, {}, 0, 100000});
  if (!active.ok() || active->jobs.empty()) return;
  // The managed switches, with the version a visit of this process confirmed.
  const std::map<std::string, int64_t> applied = fleet_.ConfirmedVersions();
  std::map<core::JobId, bool> ready;
  std::set<core::JobId> programmed;  // jobs with entries on at least one managed switch
  for (const core::Job& job : active->jobs) ready[job.id] = true;
  for (const auto& intent : intents) {
    auto it = applied.find(intent.switch_id);
    if (it != applied.end()) {
      for (core::JobId id : JobsOf(intent)) programmed.insert(id);
    }
    bool ok = it == applied.end() ||  // unmanaged switches need nothing
              it->second >= plan_version;
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
    // On a fabric without a managed switch nothing was programmed for the job: say so.
    std::string message = absl::StrCat("every switch applied plan ", plan_version);
    if (applied.empty()) {
      message = absl::StrCat("plan ", plan_version,
                             ": no switch of the topology is managed (no p4runtime endpoint), so "
                             "nothing was programmed for this job");
    } else if (!programmed.count(id)) {
      absl::StrAppend(&message, " (the job needs no entry on a managed switch)");
    }
    events.push_back(MakeEvent(now, "job_running", id, message));
  }
  if (!updates.empty()) ApplyJobUpdates(updates, events, now);
}

void Controller::ApplyJobUpdates(
    const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates,
    const std::vector<core::Event>& events, int64_t now) {
  // The workers' data-path reports of a job that this update ends are dropped after its commit.
  auto drop_data_path = [this](const std::pair<core::JobId, core::JobUpdate>& update) {
    if (update.second.state && core::IsTerminal(*update.second.state)) {
      data_paths_.Drop(update.first);
    }
  };
  absl::Status batch = storage_->jobs().UpdateMany(updates, now, events);
  if (batch.ok()) {
    for (const auto& update : updates) drop_data_path(update);
    events_.Notify();
    return;
  }
  if (!absl::IsFailedPrecondition(batch) && !absl::IsNotFound(batch)) {
    spdlog::warn("event=job_update_failed error=\"{}\"", batch.ToString());
    return;
  }
  // A command committed between the snapshot and now (a job cancelled, completed or failed) made
  // one update illegal: apply the others one by one, so that the command affects its own job only.
  // The next pass (the command woke the loop) re-plans without that job.
  int skipped = 0;
  for (size_t i = 0; i < updates.size(); ++i) {
    std::vector<core::Event> one;
    if (i < events.size()) one.push_back(events[i]);
    auto s = storage_->jobs().Update(updates[i].first, updates[i].second, now, one);
    if (s.ok()) {
      drop_data_path(updates[i]);
      continue;
    }
    ++skipped;
    if (!absl::IsFailedPrecondition(s.status()) && !absl::IsNotFound(s.status())) {
      spdlog::warn("event=job_update_failed job={} error=\"{}\"", updates[i].first,
                   s.status().ToString());
    }
  }
  spdlog::info("event=job_updates_raced updates={} skipped={}", updates.size(), skipped);
  events_.Notify();
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
  fleet_.Sync(snapshot->topology->topology);
  auto t1 = Steady::now();
  int64_t plan_version = 0;
  batch_refit_.Apply(&snapshot->jobs);  // InGo: refitted noise scales (docs/batch-size.md)
  auto replanned = MaybeReplan(*snapshot, &plan_version);
  if (Stopping()) return;  // a plan that finished is saved; its switches are for the next start
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
  SwitchFleet::Visit visit = fleet_.Reconcile(plan_version, intents);
  auto t3 = Steady::now();
  // Jobs first: a job's switches are confirmed in memory; the per-switch records (one durable
  // transaction each) are informational and follow.
  AdvanceJobs(plan_version, intents);
  auto t4 = Steady::now();
  const size_t states = visit.writes.size();
  fleet_.Persist(std::move(visit));
  // Reports of jobs that are no longer active (ended by a command, or pruned) are dropped; a job
  // that can be reported on (scheduled or running) was at least pending when the snapshot was read.
  data_paths_.Retain(snapshot->jobs);
  storage_->events().Trim(options_.keep_events).IgnoreError();
  // The dashboard's history: the plan in force (the one just saved when this pass re-planned).
  if (snapshot->plan && snapshot->plan->plan.version == plan_version) {
    stats_.Observe(clock_(), snapshot->topology->topology, &snapshot->plan->plan, snapshot->jobs);
  } else if (auto latest = storage_->plans().Latest(); latest.ok()) {
    stats_.Observe(clock_(), snapshot->topology->topology,
                   latest->has_value() ? &(*latest)->plan : nullptr, snapshot->jobs);
  }
  auto t5 = Steady::now();
  spdlog::debug(
      "event=pass plan_version={} replanned={} snapshot_ms={:.1f} plan_ms={:.1f} "
      "reconcile_ms={:.1f} advance_ms={:.1f} persist_ms={:.1f} switch_states_written={}",
      plan_version, replanned.ok() && *replanned, ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4),
      ms(t4, t5), states);
}

absl::Status Controller::Sync(int timeout_ms) {
  absl::MutexLock lock(&mu_);
  if (!started_) return absl::FailedPreconditionError("controller is not running");
  const int64_t target = passes_started_ + 1;
  wake_ = true;
  // Converged: a whole pass done and no refinement outstanding (an admission plan in force is
  // refined, and the pass that adopts the result completes, before Sync returns).
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (passes_done_ >= target && refine_fingerprint_.empty()) || stopping_;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(timeout_ms))) {
    return absl::DeadlineExceededError("controller pass did not finish in time");
  }
  return absl::OkStatus();
}

}  // namespace inac::server
