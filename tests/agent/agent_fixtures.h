// Shared helpers of agent_test: loopback addresses, a free UDP port, configurations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/job_config.h"

namespace inac::agent::testing {

// 127.a.b.host in host byte order.
uint32_t Loopback(int a, int b, int host);

// A UDP port that was free on 127.0.0.1 a moment ago (the agents bind 127.x addresses with it).
uint16_t PickUdpPort();

// A tag of `ps` (at ps_address) whose members are `workers` at worker_addresses, aggregated at
// the PS itself (no switch).
JobConfig::Tag DirectTag(uint32_t tag, const std::string& ps, uint32_t ps_address, double share,
                         double begin, double end, const std::vector<std::string>& workers,
                         const std::vector<uint32_t>& worker_addresses);

}  // namespace inac::agent::testing
