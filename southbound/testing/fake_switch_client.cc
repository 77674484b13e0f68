#include "southbound/testing/fake_switch_client.h"

#include <cstddef>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "southbound/entity_codec.h"
#include "southbound/entity_diff.h"
#include "southbound/intent_reconciler.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"

namespace inac::southbound {
namespace {}  // namespace

struct FakeSwitchClient::State {
  std::unique_ptr<IntentTranslator> translator;
  bool reachable = true;
  bool primary_on_connect = true;
  bool connected = false;
  bool primary = false;
  bool pipeline = false;
  std::optional<absl::Status> fail_next;
  std::string refuse_substring;
  absl::Status refuse_status;
  absl::flat_hash_map<std::string, p4::v1::Entity> entities;  // key -> canonical entity
  std::optional<core::SwitchIntent> applied;
  std::map<uint32_t, AggregationCounters> counters;  // by counter index
  absl::Status read_counters_status;
  int64_t read_counters_calls = 0;
  int64_t reconcile_calls = 0;
  int64_t pipeline_pushes = 0;
};

FakeSwitchClient::FakeSwitchClient(std::string switch_id)
    : switch_id_(std::move(switch_id)), state_(std::make_unique<State>()) {
  auto p4info = P4InfoIndex::EmbeddedIna();
  if (!p4info.ok()) std::abort();  // the embedded P4Info is part of the build
  auto translator = IntentTranslator::Create(*std::move(p4info));
  if (!translator.ok()) std::abort();
  state_->translator = std::make_unique<IntentTranslator>(*std::move(translator));
}

FakeSwitchClient::~FakeSwitchClient() = default;

absl::Status FakeSwitchClient::Connect() {
  absl::MutexLock lock(&mu_);
  if (!state_->reachable) {
    return absl::UnavailableError(absl::StrCat("fake switch ", switch_id_, " is unreachable"));
  }
  state_->connected = true;
  state_->primary = state_->primary_on_connect;
  return absl::OkStatus();
}

bool FakeSwitchClient::IsConnected() const {
  absl::MutexLock lock(&mu_);
  return state_->connected;
}

bool FakeSwitchClient::IsPrimary() const {
  absl::MutexLock lock(&mu_);
  return state_->connected && state_->primary;
}

void FakeSwitchClient::Disconnect() {
  absl::MutexLock lock(&mu_);
  state_->connected = false;
  state_->primary = false;
}

absl::StatusOr<bool> FakeSwitchClient::EnsurePipeline() {
  absl::MutexLock lock(&mu_);
  // Like a P4Runtime client: reading the cookie needs no session, only a reachable switch; the
  // push needs the primary's session (SwitchClient: PermissionDenied when not primary, also
  // before Connect and after Disconnect).
  if (!state_->reachable) {
    return absl::UnavailableError(absl::StrCat("fake switch ", switch_id_, " is unreachable"));
  }
  if (state_->pipeline) return false;
  if (!state_->connected || !state_->primary) return absl::PermissionDeniedError("not primary");
  state_->pipeline = true;
  state_->entities.clear();  // VERIFY_AND_COMMIT clears forwarding state
  ++state_->pipeline_pushes;
  return true;
}

absl::StatusOr<ReconcileStats> FakeSwitchClient::Reconcile(const core::SwitchIntent& intent) {
  absl::MutexLock lock(&mu_);
  State& s = *state_;
  ++s.reconcile_calls;
  if (s.fail_next.has_value()) {
    absl::Status status = *std::move(s.fail_next);
    s.fail_next.reset();
    return status;
  }
  if (!s.connected) return absl::UnavailableError("not connected");
  if (!s.pipeline) return absl::FailedPreconditionError("no pipeline");
  auto desired = s.translator->Translate(intent);
  if (!desired.ok()) return desired.status();
  std::vector<p4::v1::Entity> current;
  current.reserve(s.entities.size());
  for (const auto& [key, entity] : s.entities) current.push_back(entity);
  auto diff = DiffEntities(*s.translator, current, *desired);
  if (!diff.ok()) return diff.status();

  ReconcileStats stats;
  stats.read = diff->current;
  stats.unchanged = diff->unchanged;
  const bool writes = !diff->deletes.empty() || !diff->modifies.empty() || !diff->inserts.empty();
  if (writes && !s.primary) return absl::PermissionDeniedError("not primary");
  auto apply = [&](const std::vector<p4::v1::Update>& updates, int64_t* done) {
    if (!updates.empty()) ++stats.batches;
    for (const auto& update : updates) {
      const std::string description = DescribeEntity(update.entity());
      if (!s.refuse_substring.empty() && absl::StrContains(description, s.refuse_substring)) {
        RecordRefusal(update, s.refuse_status, &stats);
        continue;
      }
      auto canonical = CanonicalEntity(update.entity());
      const std::string key = EntityKey(*canonical);
      if (update.type() == p4::v1::Update::DELETE) {
        s.entities.erase(key);
      } else {
        s.entities[key] = *std::move(canonical);
      }
      ++*done;
    }
  };
  apply(diff->deletes, &stats.deleted);
  apply(diff->modifies, &stats.modified);
  apply(diff->inserts, &stats.inserted);
  FinishRefusals(&stats);
  if (stats.converged()) {
    s.applied = intent;
  } else {
    s.applied.reset();
  }
  return stats;
}

absl::StatusOr<std::vector<AggregationCounters>> FakeSwitchClient::ReadCounters(
    const core::SwitchIntent& intent) {
  absl::MutexLock lock(&mu_);
  ++state_->read_counters_calls;
  if (!state_->reachable) return absl::UnavailableError("unreachable");
  if (!state_->read_counters_status.ok()) return state_->read_counters_status;
  std::vector<AggregationCounters> out;
  for (const auto& job : intent.jobs) {
    if (job.multicast_group == 0) continue;
    AggregationCounters c{job.tag, job.job_id, job.multicast_group, {}, {}, {}};
    auto it = state_->counters.find(job.multicast_group);
    if (it != state_->counters.end()) {
      c.aggregated = it->second.aggregated;
      c.preempted = it->second.preempted;
      c.fallback = it->second.fallback;
    }
    out.push_back(c);
  }
  return out;
}

void FakeSwitchClient::SetReachable(bool reachable) {
  absl::MutexLock lock(&mu_);
  state_->reachable = reachable;
  if (!reachable) {
    state_->connected = false;
    state_->primary = false;
  }
}

void FakeSwitchClient::SetPrimary(bool primary) {
  absl::MutexLock lock(&mu_);
  state_->primary_on_connect = primary;
  if (state_->connected) state_->primary = primary;
}

void FakeSwitchClient::FailNextReconcile(absl::Status status) {
  absl::MutexLock lock(&mu_);
  state_->fail_next = std::move(status);
}

void FakeSwitchClient::RefuseUpdatesMatching(std::string substring, absl::Status status) {
  absl::MutexLock lock(&mu_);
  state_->refuse_substring = std::move(substring);
  state_->refuse_status = std::move(status);
}

void FakeSwitchClient::Restart() {
  absl::MutexLock lock(&mu_);
  state_->pipeline = false;
  state_->entities.clear();
  state_->applied.reset();
  state_->connected = false;
  state_->primary = false;
  state_->counters.clear();
}

void FakeSwitchClient::SetCounters(const AggregationCounters& counters) {
  absl::MutexLock lock(&mu_);
  state_->counters[counters.multicast_group] = counters;
}

void FakeSwitchClient::FailReadCounters(absl::Status status) {
  absl::MutexLock lock(&mu_);
  state_->read_counters_status = std::move(status);
}

std::optional<core::SwitchIntent> FakeSwitchClient::applied_intent() const {
  absl::MutexLock lock(&mu_);
  return state_->applied;
}

int64_t FakeSwitchClient::entity_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(state_->entities.size());
}

int64_t FakeSwitchClient::reconcile_calls() const {
  absl::MutexLock lock(&mu_);
  return state_->reconcile_calls;
}

int64_t FakeSwitchClient::pipeline_pushes() const {
  absl::MutexLock lock(&mu_);
  return state_->pipeline_pushes;
}

int64_t FakeSwitchClient::read_counters_calls() const {
  absl::MutexLock lock(&mu_);
  return state_->read_counters_calls;
}

}  // namespace inac::southbound
