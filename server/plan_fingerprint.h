// The fingerprint of the plan inputs: how the controller decides whether to re-plan (change
// detection, not planning -- hence here and not in the pure scheduler/). `inac plan` stamps its
// plans with it too, so that a printed plan carries the fingerprint the controller would store.
//
// Contract: PlanFingerprint is a stable digest of what a plan depends on: format version, the
// planner options that change plans (algorithm, memory policy, seed, rounds, paths, spread and
// split limits, time limits), the topology version and every job's id and spec, in any job
// order, as SHA-256 (OpenSSL) of a canonical encoding, in hex. Equal inputs give equal
// fingerprints across builds and machines; the controller re-plans when it changes, and stores it
// in core::Plan::fingerprint. PlanRequest::topology, previous, now_ms and the options documented
// in scheduler/planner.h as "not part of PlanFingerprint" are not read. Pure; never fails.
//
// Thread safety: a pure function.
#pragma once

#include <string>

#include "scheduler/planner.h"

namespace inac::server {

std::string PlanFingerprint(const scheduler::PlanRequest& request);

}  // namespace inac::server
