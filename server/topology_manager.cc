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

absl::StatusOr<int64_t> TopologyManager::PutTopology(const core::Topology& topology) {
  auto problems = core::ValidateTopology(topology);
  if (!problems.empty()) return core::ProblemsError(problems);
  const int64_t now = clock_();
  auto version = storage_->topology().Put(
      topology, now, std::nullopt,
      {MakeEvent(now, "topology_changed", std::nullopt,
                 absl::StrFormat("topology replaced: %d switches, %d hosts, %d links",
                                 topology.switches.size(), topology.hosts.size(),
                                 topology.links.size()))});
  if (version.ok()) {
    events_->Notify();
    wake_();
  }
  return version;
}

absl::StatusOr<core::Link> TopologyManager::SetLinkStatus(const std::string& link_id,
                                                          core::LinkStatus status) {
  // Optimistic concurrency: the write names the version it read; a concurrent change is retried.
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
    const int64_t now = clock_();
    auto version = storage_->topology().Put(
        topology, now, (*record)->version,
        {MakeEvent(
            now, status == core::LinkStatus::kDown ? "link_down" : "link_up", std::nullopt,
            absl::StrCat("link ", link_id, " set ", std::string(core::LinkStatusName(status))))});
    if (version.ok()) {
      events_->Notify();
      wake_();
      return result;
    }
    if (version.status().code() != absl::StatusCode::kFailedPrecondition) return version.status();
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
