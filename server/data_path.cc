#include "server/data_path.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace inac::server {

namespace {

int64_t SaturatedAdd(int64_t a, int64_t b) {
  if (b > 0 && a > std::numeric_limits<int64_t>::max() - b) {
    return std::numeric_limits<int64_t>::max();
  }
  return a + b;
}

}  // namespace

std::string_view DataPathKindName(DataPathKind kind) {
  switch (kind) {
    case DataPathKind::kIna:
      return "ina";
    case DataPathKind::kPs:
      return "ps";
    case DataPathKind::kFallback:
      return "fallback";
  }
  return "ina";
}

std::optional<DataPathKind> ParseDataPathKind(std::string_view name) {
  for (DataPathKind kind : {DataPathKind::kIna, DataPathKind::kPs, DataPathKind::kFallback}) {
    if (name == DataPathKindName(kind)) return kind;
  }
  return std::nullopt;
}

JobDataPath DataPathBook::Record(core::JobId job, DataPathReport report) {
  absl::MutexLock lock(&mu_);
  auto& entries = jobs_[job];
  auto [it, inserted] = entries.try_emplace(report.worker);
  if (inserted || it->second.report.path != report.path ||
      it->second.report.reason != report.reason) {
    spdlog::info("event=data_path job={} worker={} path={} reason=\"{}\"", job, report.worker,
                 DataPathKindName(report.path), report.reason);
  }
  it->second.report = std::move(report);
  it->second.seq = next_seq_++;
  return Summarize(entries);
}

std::optional<JobDataPath> DataPathBook::Get(core::JobId job) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.empty()) return std::nullopt;
  return Summarize(it->second);
}

void DataPathBook::Drop(core::JobId job) {
  absl::MutexLock lock(&mu_);
  jobs_.erase(job);
}

void DataPathBook::Retain(const std::vector<core::Job>& active) {
  std::set<core::JobId> keep;
  for (const core::Job& j : active) {
    if (!core::IsTerminal(j.state)) keep.insert(j.id);
  }
  absl::MutexLock lock(&mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (keep.count(it->first)) {
      ++it;
    } else {
      it = jobs_.erase(it);
    }
  }
}

size_t DataPathBook::size() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [job, entries] : jobs_) n += entries.size();
  return n;
}

JobDataPath DataPathBook::Summarize(const std::map<std::string, Entry>& entries) {
  JobDataPath out;
  int ina = 0, ps = 0, fallback = 0;
  const Entry* latest_fallback = nullptr;
  for (const auto& [worker, e] : entries) {
    out.workers.push_back(e.report);
    out.allreduces = SaturatedAdd(out.allreduces, e.report.allreduces);
    out.fallbacks = SaturatedAdd(out.fallbacks, e.report.fallbacks);
    switch (e.report.path) {
      case DataPathKind::kIna:
        ++ina;
        break;
      case DataPathKind::kPs:
        ++ps;
        break;
      case DataPathKind::kFallback:
        ++fallback;
        if (latest_fallback == nullptr || e.seq > latest_fallback->seq) latest_fallback = &e;
        break;
    }
  }
  std::string fallback_text;
  if (latest_fallback != nullptr) {
    fallback_text = latest_fallback->report.reason.empty()
                        ? "fallback (no reason given)"
                        : absl::StrCat("fallback: ", latest_fallback->report.reason);
  }
  const int n = static_cast<int>(entries.size());
  if (ina == n) {
    out.state = "ina";
    out.summary = "INA active";
  } else if (ps == n) {
    out.state = "ps";
    out.summary = "PS only";
  } else if (fallback == n) {
    out.state = "fallback";
    out.summary = fallback_text;
  } else {
    out.state = "mixed";
    std::vector<std::string> parts;
    if (ina > 0) parts.push_back(absl::StrCat(ina, " INA"));
    if (ps > 0) parts.push_back(absl::StrCat(ps, " PS"));
    if (fallback > 0) parts.push_back(absl::StrCat(fallback, " fallback"));
    out.summary = absl::StrCat("mixed (", absl::StrJoin(parts, ", "), ")");
    if (!fallback_text.empty()) absl::StrAppend(&out.summary, "; ", fallback_text);
  }
  return out;
}

}  // namespace inac::server
