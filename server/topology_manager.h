// TopologyManager: the TopologyService (server/services.h) over the topology store and the switch
// fleet. A topology or link change commits one transaction carrying its event, notifies the event
// hub and wakes the control loop.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>

#include "core/stores.h"
#include "server/event_hub.h"
#include "server/services.h"
#include "server/switch_fleet.h"

namespace inac::server {

class TopologyManager : public TopologyService {
 public:
  // None owned; all must outlive the manager. `wake` asks the control loop for a pass.
  TopologyManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet, Clock clock,
                  std::function<void()> wake);

  absl::StatusOr<int64_t> PutTopology(const core::Topology& topology,
                                      std::optional<int64_t> if_match) override;
  absl::StatusOr<LinkChange> SetLinkStatus(const std::string& link_id, core::LinkStatus status,
                                           std::optional<int64_t> if_match) override;
  absl::StatusOr<std::optional<core::TopologyRecord>> GetTopology() override;
  std::vector<SwitchStatus> Switches() override;
  absl::StatusOr<SwitchStatus> GetSwitch(const std::string& id) override;

 private:
  core::Storage* storage_;
  EventHub* events_;
  SwitchFleet* fleet_;
  Clock clock_;
  std::function<void()> wake_;
};

}  // namespace inac::server
