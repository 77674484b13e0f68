#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "core/validation.h"
#include "nlohmann/json.hpp"
#include "scheduler/incremental.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "server/plan_fingerprint.h"
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
      jobs_(storage, &events_, &fleet_, clock_, [this] { Wake(); }),
      topology_(storage, &events_, &fleet_, clock_, [this] { Wake(); }),
      retention_(storage, &events_, &metrics_, clock_, options_.retention),
      stats_(options_.stats) {}

Controller::~Controller() { Stop(); }

ApiServices Controller::services() {
  ApiServices s;
  s.jobs = this;
  s.topology = this;
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
  uint64_t election = options_.election_id;
  if (election == 0) {
    auto max = storage_->switch_states().MaxElectionId();
    if (!max.ok()) return max.status();
    election = *max + 1;
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
               options_.algorithm, options_.memory_policy, election);
  events_.Log("controller_started", std::nullopt,
              absl::StrCat("controller started with election id ", election));
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

scheduler::PlannerOptions Controller::PlannerOptionsOf() const {
  scheduler::PlannerOptions o;
  o.algorithm = options_.algorithm;
  o.memory_policy = options_.memory_policy;
  o.seed = options_.seed;
  o.rounds = options_.rounds;
  o.paths = options_.paths;
  o.spread_min_columns = options_.spread_min_columns;
  o.split_max_ranges = options_.split_max_ranges;
  o.replan_move_threshold = options_.replan_move_threshold;
  o.batch_rule.hysteresis = options_.batch_hysteresis;
  o.batch_rule.min_interval_ms = options_.batch_min_interval_ms;
  return o;
}

std::string Controller::Fingerprint(const core::Snapshot& snapshot) const {
  scheduler::PlanRequest request;
  request.topology_version = snapshot.topology ? snapshot.topology->version : 0;
  request.jobs = snapshot.jobs;
  request.options = PlannerOptionsOf();
  return PlanFingerprint(request);
}

absl::StatusOr<core::Plan> Controller::ComputePlan(const core::Topology& topology,
                                                   const std::vector<core::Job>& jobs,
                                                   const core::Plan* previous) {
  scheduler::PlanRequest request;
  request.topology = &topology;
  request.jobs = jobs;
  request.previous = previous;
  request.now_ms = clock_();
  request.options = PlannerOptionsOf();
  request.batch_changed_ms = batch_refit_.ChangedMs();
  auto out = scheduler::ComputePlan(request);
  if (!out.ok()) return out.status();
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
  metrics_.CountPriorityRefresh();
  spdlog::info("event=priorities_refreshed version={} jobs={}", *version, plan.jobs.size());
  events_.Notify();
  return true;
}

absl::StatusOr<bool> Controller::MaybeReplan(const core::Snapshot& snapshot,
                                             int64_t* plan_version) {
  std::string fingerprint = Fingerprint(snapshot);
  if (snapshot.plan && snapshot.plan->plan.fingerprint == fingerprint) {
    *plan_version = snapshot.plan->plan.version;
    {
      absl::MutexLock lock(&mu_);  // a final plan for these inputs: nothing left to refine
      refine_fingerprint_.clear();
      refine_request_.reset();
      refine_result_.reset();
    }
    MarkScheduled(snapshot, *plan_version);
    return RefreshPriorities(snapshot, plan_version);
  }
  if (options_.incremental && snapshot.plan &&
      snapshot.plan->plan.fingerprint == absl::StrCat("admitted:", fingerprint)) {
    return RefineStep(snapshot, fingerprint, plan_version);
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
    // A spec that is invalid whatever the topology (stored before a limit existed) never
    // becomes placeable: it fails rather than waiting forever.
    const bool invalid = !core::ValidateJobSpec(job.spec, nullptr, "").empty();
    if (missing_host || invalid) {
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
  auto start = std::chrono::steady_clock::now();
  // Incremental: admit onto the plan in force (milliseconds) and refine in the background; the
  // first plan (nothing to admit onto) is the full plan either way.
  std::optional<scheduler::AdmissionOutput> admission;
  absl::StatusOr<core::Plan> plan = absl::UnknownError("not planned");
  if (options_.incremental && previous != nullptr) {
    scheduler::PlanRequest request;
    request.topology = &topology;
    request.jobs = placeable;
    request.previous = previous;
    request.now_ms = clock_();
    request.options = PlannerOptionsOf();
    auto admitted = scheduler::AdmitJobs(request);
    if (admitted.ok()) {
      plan = admitted->output.plan;
      admission = std::move(*admitted);
    } else {
      plan = admitted.status();
    }
  } else {
    plan = ComputePlan(topology, placeable, previous);
  }
  double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    const std::string error(plan.status().message());
    events_.Log("plan_failed", std::nullopt, absl::StrCat("planning failed: ", error));
    spdlog::warn("event=plan_failed error=\"{}\"", error);
    if (!updates.empty()) ApplyJobUpdates(updates, events, now);
    return plan.status();
  }
  plan->solve_ms = solve_ms;
  // An admission plan that kept jobs is provisional until the refiner's full plan replaces it.
  const bool provisional = admission.has_value() && !admission->full;
  plan->fingerprint = provisional ? absl::StrCat("admitted:", fingerprint) : fingerprint;
  plan->version = 0;  // next version
  auto intents = core::DeriveSwitchIntents(topology, *plan);
  std::vector<core::Event> plan_events = {
      MakeEvent(now, "plan_saved", std::nullopt,
                absl::StrFormat("planned %d job(s) with %s in %.1f ms", plan->jobs.size(),
                                plan->algorithm, solve_ms))};
  // InGo: jobs whose batch size changed (docs/batch-size.md); workers read it from /config.
  for (const auto& [id, message] : batch_refit_.NoteBatchChanges(previous, *plan, now)) {
    plan_events.push_back(MakeEvent(now, "job_batch_size", id, message));
  }
  if (provisional) {
    plan_events[0].message = absl::StrFormat(
        "admitted %d job(s), removed %d, kept %d unchanged in %.1f ms (full re-plan in the "
        "background)",
        admission->admitted.size(), admission->removed.size(), admission->kept.size(), solve_ms);
    plan_events.push_back(MakeEvent(now, "plan_admitted", std::nullopt, plan_events[0].message));
  }
  auto version = storage_->plans().Save(*plan, intents, now, plan_events);
  if (!version.ok()) return version.status();
  *plan_version = *version;
  metrics_.ObservePlan(solve_ms / 1000.0);  // admissions and full plans alike
  stats_.CountReplan(now);
  spdlog::info("event=plan_saved version={} jobs={} solve_ms={:.1f} admitted={}", *version,
               plan->jobs.size(), solve_ms, provisional);
  {
    absl::MutexLock lock(&mu_);
    refine_result_.reset();  // an older refinement is for other inputs
    refine_request_.reset();
    refine_fingerprint_.clear();
    if (provisional) {
      refine_fingerprint_ = fingerprint;
      refine_request_ = RefineRequest{fingerprint, *version, topology, placeable, *plan, now};
      refine_request_->previous.version = *version;
    }
  }
  for (const core::Job& job : placeable) {
    if (job.state == core::JobState::kPending) {
      core::JobUpdate u;
      u.state = core::JobState::kScheduled;
      updates.push_back({job.id, u});
      events.push_back(
          MakeEvent(now, "job_scheduled", job.id, absl::StrCat("scheduled in plan ", *version)));
    }
  }
  if (!updates.empty()) ApplyJobUpdates(updates, events, now);
  storage_->plans().Prune(options_.keep_plans).IgnoreError();
  events_.Notify();
  return true;
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

absl::StatusOr<bool> Controller::RefineStep(const core::Snapshot& snapshot,
                                            const std::string& fingerprint, int64_t* plan_version) {
  const core::Plan& admitted = snapshot.plan->plan;
  *plan_version = admitted.version;
  MarkScheduled(snapshot, *plan_version);
  std::optional<RefineResult> result;
  {
    absl::MutexLock lock(&mu_);
    if (refine_result_ && (refine_result_->fingerprint != fingerprint ||
                           refine_result_->base_version != admitted.version)) {
      refine_result_.reset();  // for other inputs or another admission plan
    }
    if (refine_result_) {
      // refine_fingerprint_ is cleared once the result is saved (Sync waits for that).
      result = std::move(refine_result_);
      refine_result_.reset();
      if (!result->output.ok()) {
        refine_failed_fingerprint_ = fingerprint;
        refine_fingerprint_.clear();
      }
    } else if (refine_failed_fingerprint_ == fingerprint) {
      return false;  // the full re-plan of these inputs failed: the admission plan stays
    } else if (refine_fingerprint_ != fingerprint || (!refine_request_ && !refine_running_)) {
      // A restart found this admission plan, or the answer was for another base: ask (again).
      refine_fingerprint_ = fingerprint;
      std::vector<core::Job> jobs;
      for (const core::Job& job : snapshot.jobs) {
        if (admitted.FindJob(job.id) != nullptr) jobs.push_back(job);
      }
      refine_request_ =
          RefineRequest{fingerprint,     admitted.version, snapshot.topology->topology,
                        std::move(jobs), admitted,         clock_()};
      return false;
    } else {
      return false;  // queued or solving: the refiner wakes the loop when it is done
    }
  }
  const int64_t now = clock_();
  if (!result->output.ok()) {
    const std::string error(result->output.status().message());
    events_.Log("plan_failed", std::nullopt,
                absl::StrCat("background re-plan failed (the admission plan stays): ", error));
    spdlog::warn("event=plan_refine_failed error=\"{}\"", error);
    return false;
  }
  core::Plan plan = std::move(result->output->plan);
  plan.solve_ms = result->solve_ms;
  plan.fingerprint = fingerprint;
  plan.version = 0;
  auto intents = core::DeriveSwitchIntents(snapshot.topology->topology, plan);
  const std::string message = absl::StrFormat(
      "refined plan %d: full re-plan of %d job(s) with %s in %.1f ms; %d running job(s) kept "
      "their routes (gain within the move threshold), %d moved",
      admitted.version, plan.jobs.size(), plan.algorithm, result->solve_ms,
      result->output->kept_by_threshold.size(), result->output->moved_by_threshold.size());
  std::vector<core::Event> refined_events = {MakeEvent(now, "plan_saved", std::nullopt, message),
                                             MakeEvent(now, "plan_refined", std::nullopt, message)};
  // InGo: jobs whose batch size changed (docs/batch-size.md); workers read it from /config.
  for (const auto& [id, batch_message] : batch_refit_.NoteBatchChanges(&admitted, plan, now)) {
    refined_events.push_back(MakeEvent(now, "job_batch_size", id, batch_message));
  }
  auto version = storage_->plans().Save(plan, intents, now, refined_events);
  {
    // Settled at the end of this pass (after the reconciliation of the refined plan), so that
    // Sync returns with the switches programmed; a failed save is asked again next pass.
    absl::MutexLock lock(&mu_);
    refine_settle_at_pass_end_ = true;
  }
  if (!version.ok()) return version.status();
  *plan_version = *version;
  metrics_.ObservePlan(result->solve_ms / 1000.0);
  stats_.CountReplan(now);
  spdlog::info("event=plan_refined version={} base={} jobs={} solve_ms={:.1f} kept={} moved={}",
               *version, admitted.version, plan.jobs.size(), result->solve_ms,
               result->output->kept_by_threshold.size(), result->output->moved_by_threshold.size());
  storage_->plans().Prune(options_.keep_plans).IgnoreError();
  events_.Notify();
  return true;
}

void Controller::RefinerMain() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return refine_request_.has_value() || refiner_exit_;
  };
  while (true) {
    RefineRequest request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (refiner_exit_) return;
      request = std::move(*refine_request_);
      refine_request_.reset();
      refine_running_ = true;
    }
    scheduler::PlanRequest plan_request;
    plan_request.topology = &request.topology;
    plan_request.jobs = request.jobs;
    plan_request.previous = &request.previous;
    plan_request.now_ms = request.now_ms;
    plan_request.options = PlannerOptionsOf();
    plan_request.batch_changed_ms = batch_refit_.ChangedMs();
    if (options_.replan_budget_ms > 0) {
      plan_request.options.lp_time_limit_s = options_.replan_budget_ms / 1000.0;
    }
    const auto start = std::chrono::steady_clock::now();
    auto output = scheduler::ComputePlan(plan_request);
    const double solve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    absl::MutexLock lock(&mu_);
    refine_running_ = false;
    // A newer change superseded these inputs while solving: the answer is dropped.
    if (refine_fingerprint_ == request.fingerprint && !refiner_exit_) {
      refine_result_ =
          RefineResult{request.fingerprint, request.base_version, std::move(output), solve_ms};
      wake_ = true;
    }
  }
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

// ------------------------------------------------------------------------------------------------
// Services: jobs and topology are the managers'; plans, events and health are the loop's.

absl::StatusOr<core::CreateJobResult> Controller::SubmitJob(
    const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) {
  auto result = jobs_.SubmitJob(spec, idempotency);
  if (result.ok() && result->created) stats_.CountSubmission(clock_());
  return result;
}
absl::StatusOr<core::Job> Controller::CancelJob(core::JobId id) {
  auto job = jobs_.CancelJob(id);
  if (job.ok()) data_paths_.Drop(id);  // after the commit: see ReportDataPath
  return job;
}
absl::StatusOr<core::Job> Controller::ReportProgress(core::JobId id, int64_t iterations_done,
                                                     std::optional<double> loss) {
  auto job = jobs_.ReportProgress(id, iterations_done, loss);
  if (job.ok()) {
    stats_.ObserveProgress(id, clock_(), job->iterations_done);
    if (core::IsTerminal(job->state)) data_paths_.Drop(id);  // completed
  }
  return job;
}
absl::Status Controller::ReportGradientStats(core::JobId id, double grad_sqr_local,
                                             double grad_sqr_global) {
  auto job = jobs_.GetJob(id);
  if (!job.ok()) return job.status();
  // The batch the job runs at: its plan's, else the submitted one.
  int batch = job->spec.batch_size;
  if (auto plan = storage_->plans().Latest(); plan.ok() && plan->has_value()) {
    if (const core::JobPlan* jp = (*plan)->plan.FindJob(id); jp && jp->batch_size > 0) {
      batch = jp->batch_size;
    }
  }
  auto published = batch_refit_.Add(*job, batch, grad_sqr_local, grad_sqr_global);
  if (!published.ok()) return published.status();
  if (*published) {
    const double noise_scale = batch_refit_.Published(id).value_or(0);
    spdlog::info("event=noise_scale_refit job={} noise_scale={:.1f}", id, noise_scale);
    // Kept in the event log so a restart restores it (BatchRefit::Restore).
    auto appended = storage_->events().Append(MakeEvent(
        clock_(), "noise_scale_refit", id,
        absl::StrCat("gradient noise scale refitted to ", absl::StrFormat("%.1f", noise_scale)),
        nlohmann::json{{"noise_scale", noise_scale}}.dump()));
    if (!appended.ok()) {
      spdlog::warn("event=noise_scale_refit_not_stored job={} error=\"{}\"", id,
                   std::string(appended.status().message()));
    }
    events_.Notify();
    Wake();
  }
  return absl::OkStatus();
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
absl::StatusOr<core::Job> Controller::GetJob(core::JobId id) { return jobs_.GetJob(id); }
absl::StatusOr<core::JobPage> Controller::ListJobs(const core::JobFilter& filter) {
  return jobs_.ListJobs(filter);
}
absl::StatusOr<JobConfig> Controller::GetJobConfig(core::JobId id) {
  return jobs_.GetJobConfig(id);
}
std::vector<InaCounterSample> Controller::JobCounters(core::JobId id) {
  return jobs_.JobCounters(id);
}
absl::StatusOr<JobDataPath> Controller::ReportDataPath(core::JobId id,
                                                       const DataPathReport& report) {
  auto job = jobs_.GetJob(id);
  if (!job.ok()) return job.status();
  auto not_accepted = [id](core::JobState state) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(core::JobStateName(state)),
                     "; data-path reports are accepted only while it is scheduled or running"));
  };
  if (job->state != core::JobState::kScheduled && job->state != core::JobState::kRunning) {
    return not_accepted(job->state);
  }
  if (std::find(job->spec.workers.begin(), job->spec.workers.end(), report.worker) ==
      job->spec.workers.end()) {
    return core::WithField(
        absl::InvalidArgumentError(absl::StrCat("worker: ", core::QuoteForMessage(report.worker),
                                                " is not a worker of job ", id)),
        "worker");
  }
  DataPathReport stored = report;
  stored.updated_ms = clock_();
  JobDataPath path = data_paths_.Record(id, std::move(stored));
  // A job that ended meanwhile keeps no report. Every end (CancelJob, ReportProgress,
  // ApplyJobUpdates) drops the job's reports after its commit, so either that drop follows this
  // record, or this read sees the end.
  auto after = jobs_.GetJob(id);
  if (!after.ok() || core::IsTerminal(after->state)) {
    data_paths_.Drop(id);
    if (!after.ok()) return after.status();
    return not_accepted(after->state);
  }
  return path;
}
std::optional<JobDataPath> Controller::DataPath(core::JobId id) { return data_paths_.Get(id); }

absl::StatusOr<int64_t> Controller::PutTopology(const core::Topology& topology,
                                                std::optional<int64_t> if_match) {
  return topology_.PutTopology(topology, if_match);
}
absl::StatusOr<LinkChange> Controller::SetLinkStatus(const std::string& link_id,
                                                     core::LinkStatus status,
                                                     std::optional<int64_t> if_match) {
  return topology_.SetLinkStatus(link_id, status, if_match);
}
absl::StatusOr<std::optional<core::TopologyRecord>> Controller::GetTopology() {
  return topology_.GetTopology();
}
std::vector<SwitchStatus> Controller::Switches() { return topology_.Switches(); }
absl::StatusOr<SwitchStatus> Controller::GetSwitch(const std::string& id) {
  return topology_.GetSwitch(id);
}

absl::StatusOr<std::optional<core::PlanRecord>> Controller::CurrentPlan() {
  return storage_->plans().Latest();
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
  const core::Plan* previous = snapshot->plan ? &snapshot->plan->plan : nullptr;
  auto start = std::chrono::steady_clock::now();
  auto plan = ComputePlan(topology, jobs, previous);
  if (!plan.ok()) return plan.status();
  plan->solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (core::JobPlan& jp : plan->jobs) {
    if (jp.job_id == candidate.id) jp.job_id = 0;
  }
  return plan;
}

absl::StatusOr<std::vector<core::Event>> Controller::Events(const core::EventFilter& filter) {
  return storage_->events().List(filter);
}

int64_t Controller::WaitForEvents(int64_t after_seq, int timeout_ms) {
  return events_.WaitForEvents(after_seq, timeout_ms);
}

absl::Status Controller::RecordAudit(core::AuditEntry entry) {
  if (entry.time_ms == 0) entry.time_ms = clock_();
  return storage_->audit().Append(entry).status();
}

absl::StatusOr<core::AuditPage> Controller::ListAudit(const core::AuditFilter& filter) {
  return storage_->audit().List(filter);
}

bool Controller::LoopAlive() {
  absl::MutexLock lock(&mu_);
  if (!started_) return false;
  if (passes_done_ == 0) return true;  // first pass still running
  return clock_() - last_pass_ms_ < 5 * options_.timer_ms + 60000;
}

absl::Status Controller::Ready() {
  if (absl::Status health = storage_->Health(); !health.ok()) {
    return absl::UnavailableError(absl::StrCat("database: ", health.message()));
  }
  auto last = storage_->events().LastSeq();
  if (!last.ok()) {
    return absl::UnavailableError(absl::StrCat("database: ", last.status().message()));
  }
  if (!LoopAlive()) return absl::UnavailableError("controller loop is not running");
  std::vector<std::string> down;
  for (const SwitchStatus& s : Switches()) {
    if (s.managed && !s.connected) down.push_back(s.id);
  }
  if (!down.empty()) {
    std::string list;
    for (size_t i = 0; i < down.size() && i < 10; ++i) {
      absl::StrAppend(&list, i ? ", " : "", down[i]);
    }
    return absl::UnavailableError(absl::StrCat(down.size(), " switch(es) unreachable: ", list));
  }
  return absl::OkStatus();
}

ControllerMetrics Controller::Metrics() {
  ControllerMetrics m = metrics_.Counters();
  {
    absl::MutexLock lock(&mu_);
    m.last_pass_ms = last_pass_ms_;
  }
  auto counts = storage_->jobs().CountByState();
  if (counts.ok()) m.jobs_by_state = *counts;
  m.switches = Switches();
  m.ina_counters = fleet_.Counters();
  std::stable_sort(m.ina_counters.begin(), m.ina_counters.end(),
                   [](const InaCounterSample& a, const InaCounterSample& b) {
                     return a.job_id < b.job_id;  // switch and tag order kept from the fleet
                   });
  return m;
}

std::string Controller::MetricsText() { return metrics_.Render(Metrics()); }

}  // namespace inac::server
