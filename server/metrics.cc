#include "server/metrics.h"

#include <array>
#include <sstream>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace inac::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Seconds: planning runs from under a millisecond (a few jobs) to a minute (a MIP at k=32).
const Histogram::BucketBoundaries kPlanBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                  1,     5,     10,   30,   60};
// Seconds: a reconciliation is a read and a few batched writes over a local gRPC channel.
const Histogram::BucketBoundaries kReconcileBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                       0.05,   0.1,   0.25,   0.5,   1,    5};
const Histogram::BucketBoundaries kPassBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                  1,     5,     10,   30,   60};
const Histogram::BucketBoundaries kHttpBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1,    2.5};

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  plan_seconds_ = &BuildHistogram()
                       .Name("inac_plan_duration_seconds")
                       .Help("Time the scheduler took per plan computed since start.")
                       .Register(r)
                       .Add({}, kPlanBuckets);
  plan_last_seconds_ = &BuildGauge()
                            .Name("inac_plan_last_duration_seconds")
                            .Help("Duration of the last planning run.")
                            .Register(r)
                            .Add({});
  priority_refreshes_ = &BuildCounter()
                             .Name("inac_priority_refreshes_total")
                             .Help(
                                 "Plan versions that only re-ranked ESA priorities from "
                                 "progress and age.")
                             .Register(r)
                             .Add({});
  reconcile_seconds_ = &BuildHistogram()
                            .Name("inac_southbound_reconcile_duration_seconds")
                            .Help("Time per switch reconciliation (read, diff, P4Runtime writes).")
                            .Register(r)
                            .Add({}, kReconcileBuckets);
  southbound_writes_ = &BuildCounter()
                            .Name("inac_southbound_writes_total")
                            .Help("P4Runtime updates the switches accepted.")
                            .Register(r)
                            .Add({});
  auto& updates = BuildCounter()
                      .Name("inac_southbound_updates_total")
                      .Help("P4Runtime updates the switches accepted, by operation.")
                      .Register(r);
  updates_inserted_ = &updates.Add({{"op", "insert"}});
  updates_modified_ = &updates.Add({{"op", "modify"}});
  updates_deleted_ = &updates.Add({{"op", "delete"}});
  southbound_errors_ = &BuildCounter()
                            .Name("inac_southbound_errors_total")
                            .Help("Refused updates and switch errors.")
                            .Register(r)
                            .Add({});
  pass_seconds_ = &BuildHistogram()
                       .Name("inac_loop_pass_duration_seconds")
                       .Help("Time per controller loop pass (snapshot, plan, reconcile, persist).")
                       .Register(r)
                       .Add({}, kPassBuckets);
  passes_ = &BuildCounter()
                 .Name("inac_loop_passes_total")
                 .Help("Controller loop passes.")
                 .Register(r)
                 .Add({});
  last_pass_time_ = &BuildGauge()
                         .Name("inac_loop_last_pass_timestamp_seconds")
                         .Help("Unix time at which the last loop pass ended.")
                         .Register(r)
                         .Add({});
  http_seconds_ = &BuildHistogram()
                       .Name("inac_http_request_duration_seconds")
                       .Help("Time to answer an API request, by method, route and status code.")
                       .Register(r);
  auto& refused = BuildCounter()
                      .Name("inac_http_auth_refusals_total")
                      .Help(
                          "API requests refused before a handler ran: 401 (no or unknown token) "
                          "or 403 (role, Host or Origin), by status code.")
                      .Register(r);
  refused_401_ = &refused.Add({{"code", "401"}});
  refused_403_ = &refused.Add({{"code", "403"}});
  audit_failures_ = &BuildCounter()
                         .Name("inac_audit_append_failures_total")
                         .Help(
                             "Audit entries of API writes that could not be stored (the write's "
                             "answer stood).")
                         .Register(r)
                         .Add({});
  auto& pruned = BuildCounter()
                     .Name("inac_retention_pruned_total")
                     .Help("Rows removed by retention: finished jobs, audit entries.")
                     .Register(r);
  pruned_jobs_ = &pruned.Add({{"kind", "jobs"}});
  pruned_audit_ = &pruned.Add({{"kind", "audit"}});
}

Metrics::~Metrics() = default;

void Metrics::ObservePlan(double seconds) {
  plan_seconds_->Observe(seconds);
  plan_last_seconds_->Set(seconds);
}

void Metrics::CountPriorityRefresh() { priority_refreshes_->Increment(); }

void Metrics::ObserveReconcile(double seconds) { reconcile_seconds_->Observe(seconds); }

void Metrics::CountUpdates(int64_t inserted, int64_t modified, int64_t deleted) {
  if (inserted > 0) updates_inserted_->Increment(static_cast<double>(inserted));
  if (modified > 0) updates_modified_->Increment(static_cast<double>(modified));
  if (deleted > 0) updates_deleted_->Increment(static_cast<double>(deleted));
}

void Metrics::CountSouthbound(int64_t writes, int64_t errors) {
  if (writes > 0) southbound_writes_->Increment(static_cast<double>(writes));
  if (errors > 0) southbound_errors_->Increment(static_cast<double>(errors));
}

void Metrics::ObservePass(double seconds, int64_t now_ms) {
  pass_seconds_->Observe(seconds);
  passes_->Increment();
  last_pass_time_->Set(static_cast<double>(now_ms) / 1000.0);
}

void Metrics::ObserveHttp(std::string_view method, std::string_view route, int status,
                          double seconds) {
  http_seconds_
      ->Add({{"method", std::string(method)},
             {"route", std::string(route)},
             {"code", std::to_string(status)}},
            kHttpBuckets)
      .Observe(seconds);
}

void Metrics::CountAuthRefusal(int status) {
  (status == 401 ? refused_401_ : refused_403_)->Increment();
}

void Metrics::CountAuditFailure() { audit_failures_->Increment(); }

void Metrics::CountPruned(int64_t jobs, int64_t audit) {
  if (jobs > 0) pruned_jobs_->Increment(static_cast<double>(jobs));
  if (audit > 0) pruned_audit_->Increment(static_cast<double>(audit));
}

ControllerMetrics Metrics::Counters() const {
  ControllerMetrics m;
  const auto plan = plan_seconds_->Collect().histogram;
  m.plans_computed = static_cast<int64_t>(plan.sample_count);
  m.plan_ms_sum = plan.sample_sum * 1000.0;
  m.last_plan_ms = plan_last_seconds_->Value() * 1000.0;
  m.priority_refreshes = static_cast<int64_t>(priority_refreshes_->Value());
  const auto reconcile = reconcile_seconds_->Collect().histogram;
  m.reconcile_runs = static_cast<int64_t>(reconcile.sample_count);
  m.reconcile_ms_sum = reconcile.sample_sum * 1000.0;
  m.southbound_writes = static_cast<int64_t>(southbound_writes_->Value());
  m.southbound_errors = static_cast<int64_t>(southbound_errors_->Value());
  m.loop_passes = static_cast<int64_t>(passes_->Value());
  m.last_pass_ms = static_cast<int64_t>(last_pass_time_->Value() * 1000.0 + 0.5);
  m.auth_refusals = static_cast<int64_t>(refused_401_->Value() + refused_403_->Value());
  m.audit_failures = static_cast<int64_t>(audit_failures_->Value());
  m.pruned_jobs = static_cast<int64_t>(pruned_jobs_->Value());
  m.pruned_audit = static_cast<int64_t>(pruned_audit_->Value());
  return m;
}

std::string Metrics::Render(const ControllerMetrics& m) const {
  // The state: a registry built for this scrape only.
  prometheus::Registry state;
  auto& jobs = BuildGauge().Name("inac_jobs").Help("Jobs by state.").Register(state);
  for (auto s : {core::JobState::kPending, core::JobState::kScheduled, core::JobState::kRunning,
                 core::JobState::kCompleted, core::JobState::kCancelled, core::JobState::kFailed}) {
    auto it = m.jobs_by_state.find(s);
    jobs.Add({{"state", std::string(core::JobStateName(s))}})
        .Set(it == m.jobs_by_state.end() ? 0 : static_cast<double>(it->second));
  }
  auto& connected = BuildGauge()
                        .Name("inac_switch_connected")
                        .Help("1 when the P4Runtime session is up.")
                        .Register(state);
  auto& primary = BuildGauge()
                      .Name("inac_switch_primary")
                      .Help("1 when this controller is the switch's primary.")
                      .Register(state);
  auto& in_sync = BuildGauge()
                      .Name("inac_switch_in_sync")
                      .Help("1 when the switch holds its latest intent.")
                      .Register(state);
  auto& utilisation = BuildGauge()
                          .Name("inac_switch_aggregator_utilisation")
                          .Help("Share of the switch's aggregators allocated.")
                          .Register(state);
  for (const SwitchStatus& s : m.switches) {
    if (s.managed) {
      connected.Add({{"switch", s.id}}).Set(s.connected);
      primary.Add({{"switch", s.id}}).Set(s.primary);
      in_sync.Add({{"switch", s.id}})
          .Set(s.applied_version == s.intent_version && s.last_error.empty());
    }
    if (s.aggregators_total > 0) {
      utilisation.Add({{"switch", s.id}})
          .Set(static_cast<double>(s.aggregators_used) / static_cast<double>(s.aggregators_total));
    }
  }
  // Per job and switch (the tags of a job's shards on one switch summed), as last read.
  auto& packets = BuildCounter()
                      .Name("inac_ina_packets_total")
                      .Help(
                          "INA packets per job and switch as last read from the switch's "
                          "counters: aggregated, fallback (sent on unaggregated) or preempted. "
                          "Reset when the switch restarts or its pipeline is pushed.")
                      .Register(state);
  std::map<std::pair<core::JobId, std::string>, std::array<int64_t, 3>> per_job_switch;
  for (const InaCounterSample& c : m.ina_counters) {
    auto& v = per_job_switch[{c.job_id, c.switch_id}];
    v[0] += c.aggregated_packets;
    v[1] += c.fallback_packets;
    v[2] += c.preempted_packets;
  }
  static constexpr const char* kKinds[] = {"aggregated", "fallback", "preempted"};
  for (const auto& [key, v] : per_job_switch) {
    for (int k = 0; k < 3; ++k) {
      packets.Add({{"job", std::to_string(key.first)}, {"switch", key.second}, {"kind", kKinds[k]}})
          .Increment(static_cast<double>(v[k]));
    }
  }
  std::vector<prometheus::MetricFamily> families = state.Collect();
  std::vector<prometheus::MetricFamily> observed = registry_->Collect();
  families.insert(families.end(), observed.begin(), observed.end());
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace inac::server
