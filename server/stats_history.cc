#include "server/stats_history.h"

#include <algorithm>
#include <set>

namespace inac::server {

using core::Json;

StatsHistory::StatsHistory(StatsHistoryOptions options) : options_(options) {
  options_.resolution_ms = std::max<int64_t>(1, options_.resolution_ms);
  options_.window_ms = std::max(options_.resolution_ms, options_.window_ms);
  max_buckets_ = static_cast<size_t>(options_.window_ms / options_.resolution_ms) + 1;
}

StatsBucket& StatsHistory::BucketAt(int64_t now_ms) {
  int64_t start = now_ms - now_ms % options_.resolution_ms;
  if (now_ms < 0 && now_ms % options_.resolution_ms != 0) start -= options_.resolution_ms;
  if (!buckets_.empty() && start <= buckets_.back().start_ms) return buckets_.back();
  StatsBucket bucket;
  bucket.start_ms = start;
  buckets_.push_back(std::move(bucket));
  while (buckets_.size() > max_buckets_ || buckets_.front().start_ms < start - options_.window_ms) {
    buckets_.pop_front();
  }
  return buckets_.back();
}

void StatsHistory::Observe(int64_t now_ms, const core::Topology& topology, const core::Plan* plan,
                           const std::vector<core::Job>& jobs) {
  std::map<std::string, int64_t> granted;
  if (plan != nullptr) {
    for (const core::JobPlan& j : plan->jobs) {
      for (const auto& [sw, count] : j.aggregators) granted[sw] += count;
    }
  }
  std::map<std::string, double> utilisation;
  for (const core::Switch& sw : topology.switches) {
    if (!sw.ina.capable || sw.ina.aggregators <= 0) continue;
    auto it = granted.find(sw.id);
    const double used = it == granted.end() ? 0.0 : static_cast<double>(it->second);
    utilisation[sw.id] = std::min(1.0, used / static_cast<double>(sw.ina.aggregators));
  }
  std::map<core::JobId, const core::Job*> by_id;
  for (const core::Job& job : jobs) by_id[job.id] = &job;

  absl::MutexLock lock(&mu_);
  std::map<core::JobId, JobStatsSample> samples;
  if (plan != nullptr) {
    for (const core::JobPlan& j : plan->jobs) {
      JobStatsSample s;
      s.rate_gbps = j.rate_gbps;
      s.lp_bound_gbps = j.lp_bound_gbps;
      s.predicted_iteration_ms = j.iteration_ms;
      if (auto it = by_id.find(j.job_id); it != by_id.end()) {
        s.iterations_done = it->second->iterations_done;
        s.iterations = it->second->spec.iterations;
      }
      if (auto p = progress_.find(j.job_id); p != progress_.end()) {
        s.reported_iteration_ms = p->second.iteration_ms;
      }
      samples[j.job_id] = s;
    }
  }
  // Progress of jobs neither planned nor active is no longer needed.
  for (auto it = progress_.begin(); it != progress_.end();) {
    if (!samples.count(it->first) && !by_id.count(it->first)) {
      it = progress_.erase(it);
    } else {
      ++it;
    }
  }
  StatsBucket& bucket = BucketAt(now_ms);
  bucket.switch_utilisation = std::move(utilisation);
  bucket.jobs = std::move(samples);
}

void StatsHistory::CountSubmission(int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ++BucketAt(now_ms).submissions;
}

void StatsHistory::CountReplan(int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  ++BucketAt(now_ms).replans;
}

void StatsHistory::ObserveProgress(core::JobId job, int64_t now_ms, int64_t iterations_done) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = progress_.try_emplace(job);
  Progress& p = it->second;
  if (!inserted && iterations_done > p.iterations_done && now_ms >= p.time_ms) {
    const double ms = static_cast<double>(now_ms - p.time_ms) /
                      static_cast<double>(iterations_done - p.iterations_done);
    p.iteration_ms = p.iteration_ms ? 0.5 * *p.iteration_ms + 0.5 * ms : ms;
  }
  if (inserted || iterations_done != p.iterations_done) {
    p.time_ms = now_ms;
    p.iterations_done = iterations_done;
  }
}

std::vector<StatsBucket> StatsHistory::Buckets(int64_t since_ms) const {
  absl::MutexLock lock(&mu_);
  std::vector<StatsBucket> out;
  for (const StatsBucket& b : buckets_) {
    if (b.start_ms >= since_ms) out.push_back(b);
  }
  return out;
}

std::optional<double> StatsHistory::ReportedIterationMs(core::JobId job) const {
  absl::MutexLock lock(&mu_);
  auto it = progress_.find(job);
  if (it == progress_.end()) return std::nullopt;
  return it->second.iteration_ms;
}

Json StatsHistory::Header(const std::vector<StatsBucket>& buckets) const {
  Json j = Json::object();
  j["resolution_ms"] = options_.resolution_ms;
  j["window_ms"] = options_.window_ms;
  Json times = Json::array();
  for (const StatsBucket& b : buckets) times.push_back(b.start_ms);
  j["times_ms"] = std::move(times);
  return j;
}

namespace {

Json Optional(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

Json StatsHistory::SwitchesJson(int64_t since_ms) const {
  const std::vector<StatsBucket> buckets = Buckets(since_ms);
  std::set<std::string> ids;
  for (const StatsBucket& b : buckets) {
    for (const auto& [id, u] : b.switch_utilisation) ids.insert(id);
  }
  Json switches = Json::array();
  for (const std::string& id : ids) {
    Json values = Json::array();
    for (const StatsBucket& b : buckets) {
      auto it = b.switch_utilisation.find(id);
      values.push_back(it == b.switch_utilisation.end() ? Json(nullptr) : Json(it->second));
    }
    switches.push_back({{"id", id}, {"aggregator_utilisation", std::move(values)}});
  }
  Json j = Header(buckets);
  j["switches"] = std::move(switches);
  return j;
}

Json StatsHistory::JobsJson(int64_t since_ms, std::optional<core::JobId> job) const {
  const std::vector<StatsBucket> buckets = Buckets(since_ms);
  std::set<core::JobId> ids;
  for (const StatsBucket& b : buckets) {
    for (const auto& [id, s] : b.jobs) {
      if (!job || *job == id) ids.insert(id);
    }
  }
  Json jobs = Json::array();
  for (core::JobId id : ids) {
    Json rate = Json::array(), bound = Json::array(), predicted = Json::array(),
         reported = Json::array(), done = Json::array(), total = Json::array();
    for (const StatsBucket& b : buckets) {
      auto it = b.jobs.find(id);
      if (it == b.jobs.end()) {
        for (Json* a : {&rate, &bound, &predicted, &reported, &done, &total}) a->push_back(nullptr);
        continue;
      }
      const JobStatsSample& s = it->second;
      rate.push_back(s.rate_gbps);
      bound.push_back(Optional(s.lp_bound_gbps));
      predicted.push_back(s.predicted_iteration_ms);
      reported.push_back(Optional(s.reported_iteration_ms));
      done.push_back(s.iterations_done);
      total.push_back(s.iterations);
    }
    jobs.push_back({{"job_id", id},
                    {"rate_gbps", std::move(rate)},
                    {"lp_bound_gbps", std::move(bound)},
                    {"predicted_iteration_ms", std::move(predicted)},
                    {"reported_iteration_ms", std::move(reported)},
                    {"iterations_done", std::move(done)},
                    {"iterations", std::move(total)}});
  }
  Json j = Header(buckets);
  j["jobs"] = std::move(jobs);
  return j;
}

Json StatsHistory::ControllerJson(int64_t since_ms) const {
  const std::vector<StatsBucket> buckets = Buckets(since_ms);
  Json submissions = Json::array(), replans = Json::array();
  for (const StatsBucket& b : buckets) {
    submissions.push_back(b.submissions);
    replans.push_back(b.replans);
  }
  Json j = Header(buckets);
  j["submissions"] = std::move(submissions);
  j["replans"] = std::move(replans);
  return j;
}

}  // namespace inac::server
