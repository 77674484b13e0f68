#include "server/switch_fleet.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace inac::server {

// One managed switch: its client and what the fleet knows about it.
struct SwitchFleet::Slot {
  core::Switch sw;
  // Serialises the loop's use of the client (a visit) with the loop's other readers. The client
  // pointer is set once at creation; its status calls (IsConnected, IsPrimary) are thread-safe.
  absl::Mutex mu;
  std::unique_ptr<southbound::SwitchClient> client;
  std::string factory_error;
  bool was_connected ABSL_GUARDED_BY(mu) = false;
  bool needs_pipeline ABSL_GUARDED_BY(mu) = true;
  // The session as last observed (after a visit, and by Watch between passes): a change wakes
  // the loop.
  bool seen_connected ABSL_GUARDED_BY(mu) = false;
  bool seen_primary ABSL_GUARDED_BY(mu) = false;
  // applied_version was confirmed by a reconciliation of this process (the stored value loaded at
  // start is only what the switch held when last seen; jobs advance on confirmed versions only).
  bool verified ABSL_GUARDED_BY(mu) = false;
  // The state last written to storage (or loaded from it): a visit that changes nothing but the
  // contact time is not written again (each write is a durable transaction).
  std::optional<core::SwitchState> persisted ABSL_GUARDED_BY(mu);
  int64_t applied_version ABSL_GUARDED_BY(mu) = 0;
  int64_t intent_version ABSL_GUARDED_BY(mu) = 0;
  int64_t entries ABSL_GUARDED_BY(mu) = 0;
  int64_t aggregators_used ABSL_GUARDED_BY(mu) = 0;
  std::vector<TableOccupancy> tables ABSL_GUARDED_BY(mu);
  std::string last_error ABSL_GUARDED_BY(mu);
  int64_t last_contact_ms ABSL_GUARDED_BY(mu) = 0;
  int64_t pipeline_pushes ABSL_GUARDED_BY(mu) = 0;
  // Clock time of the last ReadCounters attempt (none yet: read at the next chance).
  std::optional<int64_t> counters_read_ms ABSL_GUARDED_BY(mu);

  // What status readers see: a copy published after each visit.
  absl::Mutex published_mu;
  SwitchStatus published ABSL_GUARDED_BY(published_mu);

  void Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::MutexLock lock(&published_mu);
    published.intent_version = intent_version;
    published.applied_version = applied_version;
    published.last_error = last_error;
    published.last_contact_ms = last_contact_ms;
    published.pipeline_pushes = pipeline_pushes;
    published.entries = entries;
    published.aggregators_used = aggregators_used;
    published.tables = tables;
  }
};

namespace {

// A switch's stored contact time is refreshed at least this often even when nothing changed.
constexpr int64_t kContactRefreshMs = 60000;

int64_t EntryCount(const core::SwitchIntent& intent) {
  // Each aggregation is an ina_job and an ina_live entry.
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// Per table of ina.p4 (sizes as declared there) and the multicast groups (ids up to
// core::kMaxMulticastGroup): the intent's entries.
std::vector<TableOccupancy> TablesOf(const core::SwitchIntent& intent) {
  auto n = [](size_t v) { return static_cast<int64_t>(v); };
  return {{"ina_job", n(intent.jobs.size()), 4096},
          {"ina_live", n(intent.jobs.size()), 4096},
          {"ina_worker", n(intent.inputs.size()), 65536},
          {"ina_route", n(intent.routes.size()), 65536},
          {"ina_host", n(intent.host_ports.size()), 1024},
          {"multicast_groups", n(intent.multicast_groups.size()), core::kMaxMulticastGroup}};
}

}  // namespace

SwitchFleet::SwitchFleet(core::SwitchStateStore* states, EventHub* events, Metrics* metrics,
                         SwitchClientFactory factory, Clock clock, SwitchFleetOptions options)
    : states_(states),
      events_(events),
      metrics_(metrics),
      factory_(std::move(factory)),
      clock_(std::move(clock)),
      options_(options),
      pool_(std::max(1, options.parallelism - 1)) {}

SwitchFleet::~SwitchFleet() = default;

void SwitchFleet::SetElectionId(southbound::ElectionId election_id) {
  absl::MutexLock lock(&mu_);
  election_id_ = election_id;
}

southbound::ElectionId SwitchFleet::election_id() const {
  absl::MutexLock lock(&mu_);
  return election_id_;
}

std::vector<std::shared_ptr<SwitchFleet::Slot>> SwitchFleet::AllSlots() {
  std::vector<std::shared_ptr<Slot>> out;
  absl::MutexLock lock(&mu_);
  for (auto& [id, slot] : slots_) out.push_back(slot);
  return out;
}

void SwitchFleet::Sync(const core::Topology& topology) {
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, const core::Switch*> wanted;
  for (const core::Switch& sw : topology.switches) {
    if (sw.p4runtime) wanted[sw.id] = &sw;
  }
  std::vector<std::shared_ptr<Slot>> removed;
  southbound::ElectionId election;
  {
    absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&slot->mu);
    if (slot->client) slot->client->Disconnect();
    PruneCounters(slot->sw.id, nullptr);
  }
  std::vector<const core::Switch*> added;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, sw] : wanted) {
      if (!slots_.count(id)) added.push_back(sw);
    }
  }
  if (added.empty()) return;
  // The stored records of the new switches, in one read when there are many (a leader taking
  // over a fabric of 1,280 switches would otherwise wait for 1,280 reads of the store, one after
  // the other, before its first visit).
  std::map<std::string, core::SwitchState> stored_states;
  if (added.size() > 1) {
    if (auto all = states_->List(); all.ok()) {
      for (core::SwitchState& st : *all) stored_states[st.switch_id] = std::move(st);
    } else {
      // As a failed Get did: the switches start without their stored records (the first visit
      // reads each switch back anyway; the records are informational).
      spdlog::warn("event=switch_states_list_failed error=\"{}\"", all.status().ToString());
    }
  } else if (auto one = states_->Get(added[0]->id); one.ok() && one->has_value()) {
    stored_states[added[0]->id] = **one;
  }
  // Clients are built on the pool: each parses and indexes its P4Info (~0.4 ms), which for 1,280
  // new switches (a leader taking over) was half a second on the loop thread.
  std::vector<std::shared_ptr<Slot>> built(added.size());
  pool_.RunAll(added.size(), [&](size_t i) {
    const core::Switch* sw = added[i];
    const std::string& id = sw->id;
    auto slot = std::make_shared<Slot>();
    slot->sw = *sw;
    auto client = factory_(*sw, election);
    absl::MutexLock slot_lock(&slot->mu);
    if (client.ok()) {
      slot->client = std::move(*client);
    } else {
      slot->factory_error = std::string(client.status().message());
      slot->last_error = slot->factory_error;
    }
    if (auto stored = stored_states.find(id); stored != stored_states.end()) {
      slot->applied_version = stored->second.applied_version;
      slot->last_contact_ms = stored->second.last_contact_ms;
      slot->persisted = stored->second;
    }
    slot->Publish();
    built[i] = std::move(slot);
  });
  {
    absl::MutexLock lock(&mu_);
    for (auto& slot : built) slots_[slot->sw.id] = std::move(slot);
  }
  spdlog::info(
      "event=fleet_synced added={} removed={} ms={:.1f}", added.size(), removed.size(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

bool SwitchFleet::Watch() {
  bool changed = false;
  for (auto& slot : AllSlots()) {
    absl::MutexLock lock(&slot->mu);
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

SwitchFleet::Visit SwitchFleet::Reconcile(int64_t plan_version,
                                          const std::vector<core::SwitchIntent>& intents) {
  std::map<std::string, const core::SwitchIntent*> by_switch;
  for (const auto& intent : intents) by_switch[intent.switch_id] = &intent;
  std::vector<std::shared_ptr<Slot>> work = AllSlots();
  const uint64_t election = election_id().low;  // the record keeps the low 64 bits
  absl::Mutex writes_mu;
  Visit visit;
  const auto start = std::chrono::steady_clock::now();
  pool_.RunAll(work.size(), [&](size_t i) {
    core::SwitchIntent empty;
    empty.switch_id = work[i]->sw.id;
    empty.version = plan_version;
    auto it = by_switch.find(work[i]->sw.id);
    auto write =
        VisitOne(work[i], election, plan_version, it != by_switch.end() ? *it->second : empty);
    if (write) {
      absl::MutexLock lock(&writes_mu);
      visit.writes.push_back(std::move(*write));
    }
  });
  // A pass over a large fleet is worth a line (the fabric figures of docs/southbound.md come
  // from it); the periodic passes over a small one are not.
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (ms >= 500) {
    spdlog::info("event=fleet_reconciled switches={} version={} parallelism={} ms={:.1f}",
                 work.size(), plan_version, options_.parallelism, ms);
  } else {
    spdlog::debug("event=fleet_reconciled switches={} version={} parallelism={} ms={:.1f}",
                  work.size(), plan_version, options_.parallelism, ms);
  }
  return visit;
}

std::optional<SwitchFleet::StateWrite> SwitchFleet::VisitOne(const std::shared_ptr<Slot>& ptr,
                                                             uint64_t election,
                                                             int64_t plan_version,
                                                             const core::SwitchIntent& intent) {
  Slot& slot = *ptr;
  absl::MutexLock lock(&slot.mu);
  slot.intent_version = plan_version;
  slot.entries = EntryCount(intent);
  slot.tables = TablesOf(intent);
  int64_t used = 0;
  for (const auto& j : intent.jobs) used += j.aggregator_count;
  slot.aggregators_used = used;
  PruneCounters(slot.sw.id, &intent);
  if (!slot.client) {
    slot.Publish();
    return std::nullopt;
  }
  const int64_t now = clock_();
  std::string error;
  bool applied = false;
  int64_t writes = 0, errors = 0;
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
      auto ensure_pipeline = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu) -> bool {
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
      if (!slot.needs_pipeline || ensure_pipeline()) {
        const auto start = std::chrono::steady_clock::now();
        auto stats = slot.client->Reconcile(intent);
        if (!stats.ok() && slot.client->IsConnected()) {
          // The switch may have lost its pipeline since the last pass (restarted between two
          // observations of the session), or holds the cookie without a working pipeline (the
          // client then re-pushes once): check it now and retry once, rather than a timer period
          // later.
          if (ensure_pipeline()) stats = slot.client->Reconcile(intent);
        }
        metrics_->ObserveReconcile(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (!stats.ok()) {
          error = absl::StrCat("reconcile: ", stats.status().message());
          // A lost session or pipeline: check the pipeline again next time.
          slot.needs_pipeline = true;
        } else {
          // Outside the timed reconciliation; rate-limited per switch.
          MaybeReadCounters(slot, intent);
          writes += stats->writes();
          errors += stats->failed;
          metrics_->CountUpdates(stats->inserted, stats->modified, stats->deleted);
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
  metrics_->CountSouthbound(writes, errors);
  slot.last_error = error;
  if (applied) {
    slot.applied_version = plan_version;
    slot.verified = true;
  }
  slot.seen_connected = slot.client->IsConnected();
  slot.seen_primary = slot.client->IsPrimary();
  slot.Publish();
  return MakeStateWrite(ptr, election, std::move(events), false);
}

void SwitchFleet::MaybeReadCounters(Slot& slot, const core::SwitchIntent& intent) {
  bool any =
      std::any_of(intent.jobs.begin(), intent.jobs.end(),
                  [](const core::JobAggregationIntent& j) { return j.multicast_group != 0; });
  if (!any) return;
  const int64_t now = clock_();
  // Called with slot.mu held (from VisitOne).
  slot.mu.AssertHeld();
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
  absl::MutexLock lock(&counters_mu_);
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

void SwitchFleet::PruneCounters(const std::string& switch_id, const core::SwitchIntent* intent) {
  absl::MutexLock lock(&counters_mu_);
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

std::optional<SwitchFleet::StateWrite> SwitchFleet::MakeStateWrite(const std::shared_ptr<Slot>& ptr,
                                                                   uint64_t election,
                                                                   std::vector<core::Event> events,
                                                                   bool flush) {
  Slot& slot = *ptr;
  slot.mu.AssertHeld();
  core::SwitchState state;
  state.switch_id = slot.sw.id;
  state.applied_version = slot.applied_version;
  state.last_error = slot.last_error;
  state.last_contact_ms = slot.last_contact_ms;
  state.election_id = election;
  const auto& old = slot.persisted;
  // Written at once: a first record, an error or election change, events to log.
  bool now = !old || old->last_error != state.last_error || old->election_id != state.election_id ||
             !events.empty();
  // A new applied version alone (every switch, on every new plan) is written at most once per
  // period, by the first visit after it (or at Shutdown): the record is informational (jobs
  // advance on versions confirmed in memory; a restart reads the switches back), and one durable
  // transaction per switch per pass would compete with job submissions for the writer.
  int64_t age = old ? state.last_contact_ms - old->last_contact_ms : 0;
  bool dirty = old && old->applied_version != state.applied_version;
  bool later = dirty && (flush || age >= options_.state_write_period_ms);
  if (!now && !later && age <= kContactRefreshMs) return std::nullopt;
  return StateWrite{ptr, std::move(state), std::move(events)};
}

void SwitchFleet::Persist(Visit visit) {
  for (StateWrite& w : visit.writes) {
    auto s = states_->Put(w.state, w.events);
    if (!s.ok()) {
      spdlog::warn("event=switch_state_save_failed switch={} error=\"{}\"", w.state.switch_id,
                   s.ToString());
      continue;
    }
    absl::MutexLock lock(&w.slot->mu);
    w.slot->persisted = std::move(w.state);
  }
  if (!visit.writes.empty()) events_->Notify();
}

void SwitchFleet::Shutdown() {
  std::map<std::string, std::shared_ptr<Slot>> slots;
  uint64_t election;
  {
    absl::MutexLock lock(&mu_);
    slots.swap(slots_);
    election = election_id_.low;
  }
  Visit flush;
  for (auto& [id, slot] : slots) {
    absl::MutexLock lock(&slot->mu);
    if (slot->client) slot->client->Disconnect();
    if (auto write = MakeStateWrite(slot, election, {}, true)) {
      flush.writes.push_back(std::move(*write));
    }
  }
  Persist(std::move(flush));
}

std::map<std::string, int64_t> SwitchFleet::ConfirmedVersions() {
  std::map<std::string, int64_t> out;
  for (auto& slot : AllSlots()) {
    absl::MutexLock lock(&slot->mu);
    out[slot->sw.id] = slot->verified ? slot->applied_version : 0;
  }
  return out;
}

std::vector<SwitchStatus> SwitchFleet::Statuses(const core::Topology& topology,
                                                const std::vector<core::SwitchState>& states) {
  std::map<std::string, std::shared_ptr<Slot>> slots;
  uint64_t election;
  {
    absl::MutexLock lock(&mu_);
    slots = slots_;
    election = election_id_.low;
  }
  std::map<std::string, const core::SwitchState*> stored;
  for (const auto& s : states) stored[s.switch_id] = &s;
  std::vector<SwitchStatus> out;
  for (const core::Switch& sw : topology.switches) {
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
      Slot& slot = *it->second;
      {
        absl::MutexLock lock(&slot.published_mu);
        st.intent_version = slot.published.intent_version;
        st.applied_version = slot.published.applied_version;
        st.last_error = slot.published.last_error;
        st.last_contact_ms = slot.published.last_contact_ms;
        st.pipeline_pushes = slot.published.pipeline_pushes;
        st.entries = slot.published.entries;
        st.aggregators_used = slot.published.aggregators_used;
        st.tables = slot.published.tables;
      }
      // The client and factory_error are set once at creation; the status calls are thread-safe.
      st.connected = slot.client && slot.client->IsConnected();
      st.primary = slot.client && slot.client->IsPrimary();
      st.election_id = election;
      if (!slot.factory_error.empty() && st.last_error.empty()) st.last_error = slot.factory_error;
    } else if (auto s = stored.find(sw.id); s != stored.end()) {
      st.applied_version = s->second->applied_version;
      st.last_error = s->second->last_error;
      st.last_contact_ms = s->second->last_contact_ms;
    }
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<InaCounterSample> SwitchFleet::Counters() {
  std::vector<InaCounterSample> out;
  absl::MutexLock lock(&counters_mu_);
  for (const auto& [id, samples] : counters_) {
    for (const auto& [tag, sample] : samples) out.push_back(sample);
  }
  return out;
}

std::vector<InaCounterSample> SwitchFleet::JobCounters(core::JobId job) {
  std::vector<InaCounterSample> out;
  absl::MutexLock lock(&counters_mu_);
  for (const auto& [switch_id, samples] : counters_) {
    for (const auto& [tag, sample] : samples) {
      if (sample.job_id == job) out.push_back(sample);
    }
  }
  return out;
}

}  // namespace inac::server
