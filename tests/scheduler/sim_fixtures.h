// Small topologies shared by the memory and simulator tests.
#pragma once

#include <string>

#include "core/topology.h"

namespace inac::scheduler::testing {

// One INA switch "s1" with `aggregators` aggregators and `hosts` hosts h1..hN, each on a
// `gbps` link with the default latency. Processing capacity is large enough never to bind.
inline core::Topology SingleSwitch(int64_t aggregators, int hosts, double gbps = 100) {
  core::Topology t;
  core::Switch s;
  s.id = "s1";
  s.ina.capable = true;
  s.ina.processing_gbps = 1e5;
  s.ina.aggregators = aggregators;
  t.switches.push_back(s);
  for (int i = 1; i <= hosts; ++i) {
    core::Host h;
    h.id = "h" + std::to_string(i);
    t.hosts.push_back(h);
    core::Link l;
    l.a = h.id;
    l.b = "s1";
    l.id = core::DefaultLinkId(l.a, l.b);
    l.gbps = gbps;
    t.links.push_back(l);
  }
  return t;
}

}  // namespace inac::scheduler::testing
