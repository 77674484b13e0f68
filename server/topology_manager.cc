#include "server/topology_manager.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"

namespace inac::server {

TopologyManager::TopologyManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet,
                                 Clock clock, std::function<void()> wake)
    : storage_(storage),
      events_(events),
      fleet_(fleet),
      clock_(std::move(clock)),
      wake_(std::move(wake)) {}

namespace {

// The answer to a write whose If-Match names a version the topology is no longer (or not yet) at.
absl::Status VersionMismatch(core::Storage* storage, int64_t if_match) {
  auto record = storage->topology().Get();
  if (!record.ok()) return record.status();
  const int64_t current = record->has_value() ? (*record)->version : 0;
  return absl::AbortedError(
      current == 0 ? absl::StrCat("If-Match names topology version ", if_match,
                                  " but no topology has been loaded")
                   : absl::StrCat("the topology is at version ", current, ", not ", if_match,
                                  " (If-Match): GET /topology and apply the change again"));
}

}  // namespace

absl::StatusOr<int64_t> TopologyManager::PutTopology(const core::Topology& topology,
                                                     std::optional<int64_t> if_match) {
  auto problems = core::ValidateTopology(topology);
  if (!problems.empty()) return core::ProblemsError(problems);
  const int64_t now = clock_();
  // The store checks the expected version inside the write transaction (0 = no topology yet),
  // so two operators racing with the same If-Match cannot both win.
  auto version = storage_->topology().Put(
      topology, now, if_match,
      {MakeEvent(now, "topology_changed", std::nullopt,
                 absl::StrFormat("topology replaced: %d switches, %d hosts, %d links",
                                 topology.switches.size(), topology.hosts.size(),
                                 topology.links.size()))});
  if (version.ok()) {
    events_->Notify();
    wake_();
  } else if (if_match && version.status().code() == absl::StatusCode::kFailedPrecondition) {
    return VersionMismatch(storage_, *if_match);
  }
  return version;
}

absl::StatusOr<LinkChange> TopologyManager::SetLinkStatus(const std::string& link_id,
                                                          core::LinkStatus status,
                                                          std::optional<int64_t> if_match) {
  // Optimistic concurrency: the write names the version it read. Without If-Match a concurrent
  // change is retried; with it, the caller's version must be the one read.
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto record = storage_->topology().Get();
    if (!record.ok()) return record.status();
    if (!record->has_value()) return absl::NotFoundError("no topology has been loaded");
    if (if_match && *if_match != (*record)->version) return VersionMismatch(storage_, *if_match);
    core::Topology topology = (*record)->topology;
    core::Link* link = topology.FindLink(link_id);
    if (!link) return absl::NotFoundError(absl::StrCat("unknown link \"", link_id, "\""));
    if (link->status == status) return LinkChange{*link, (*record)->version};
    link->status = status;
    core::Link result = *link;
    const int64_t now = clock_();
    auto version = storage_->topology().Put(
        topology, now, (*record)->version,
        {MakeEvent(
            now, status == core::LinkStatus::kDown ? "link_down" : "link_up", std::nullopt,
            absl::StrCat("link ", link_id, " set ", std::string(core::LinkStatusName(status))))});
    if (version.ok()) {
      events_->Notify();
      wake_();
      return LinkChange{result, *version};
    }
    if (version.status().code() != absl::StatusCode::kFailedPrecondition) return version.status();
    if (if_match) return VersionMismatch(storage_, *if_match);
  }
  return absl::UnavailableError("topology changed concurrently; try again");
}

absl::StatusOr<std::optional<core::TopologyRecord>> TopologyManager::GetTopology() {
  return storage_->topology().Get();
}

std::vector<SwitchStatus> TopologyManager::Switches() {
  auto record = storage_->topology().Get();
  if (!record.ok() || !record->has_value()) return {};
  auto states = storage_->switch_states().List();
  return fleet_->Statuses((*record)->topology,
                          states.ok() ? *states : std::vector<core::SwitchState>{});
}

absl::StatusOr<SwitchStatus> TopologyManager::GetSwitch(const std::string& id) {
  for (SwitchStatus& s : Switches()) {
    if (s.id == id) return s;
  }
  return absl::NotFoundError(absl::StrCat("unknown switch \"", id, "\""));
}

}  // namespace inac::server
