// The PS of client sessions (`inac ps --serve`, agent/inac_client.h): completes whatever the job's
// members send, any number of all-reduces of any sizes, until stopped (docs/agents.md,
// "Sessions").
//
// Contract (the PS of a fixed run, agent/ps.h, with these differences):
//  - No gradient size and no iterations: a session numbers its chunks uniquely over the job's
//    tags and continuously over its all-reduces (agent/worker.h WorkerSession), so the PS keys
//    every sum by its chunk number alone and needs no layout. Whose data a packet carries, what
//    is a duplicate or a violation: as agent/ps.h (agent/ps_accounting.h). A chunk is complete when
//    the members of its packet's tag are all counted.
//  - The RESULT carries the tag value of the packet that completed the chunk and the slot of its
//    first packet; a RETRANSMIT of a complete chunk is answered with the result again under the
//    asking packet's tag and slot (a re-plan's new tag is the one the switches route). The last
//    results are kept per tag value (at least 4 windows, at least 4096).
//  - A sum no packet touched for idle_ms is dropped (a chunk its members gave up: a failed
//    all-reduce; members still waiting retransmit and keep theirs alive).
//  - A new session of the job (its members reopened: chunk numbers start again) is told by a
//    first copy (no RETRANSMIT) of a chunk that was completed more than restart_after_ms ago (a
//    copy the network delayed or duplicated arrives well within that): everything kept is
//    forgotten and the restart counted in `sessions`. Likewise a first copy into an open sum that
//    no packet touched for restart_after_ms (an all-reduce of earlier sessions that failed: its
//    members gave up, while members waiting for a live sum retransmit at least every second)
//    starts the sum again (`stale_restarted`); a live sum taken for stale only costs its
//    members one more retransmission. Hence a limit: the
//    members of a job hold one session each at a time, and reopen no sooner than restart_after_ms
//    after the last all-reduce of the previous ones (a training process restarts far slower);
//    sooner, a retransmission could be answered with the old session's result.
//  - Re-plans: each configuration published on `updates` adds its tag values when the PS keeps
//    its members (the same workers over its tags); otherwise the run fails with
//    FailedPrecondition.
//  - One thread (PsOptions::threads is not used). Runs until *stop or duration_ms; OK then.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "agent/job_config.h"
#include "agent/ps.h"

namespace inac::agent {

struct ServeReport {
  PsReport ps;  // counters, plans, workers, tags (no iterations)
  int64_t chunks_completed = 0;
  int64_t dropped_idle = 0;     // sums dropped after idle_ms
  int64_t stale_restarted = 0;  // partial sums of earlier sessions started again
  int64_t sessions = 1;         // sessions seen (restarts + 1)
};

struct ServeOptions {
  int64_t idle_ms = 10000;
  int64_t restart_after_ms = 1000;
};

absl::StatusOr<ServeReport> ServePs(const JobConfig& config, const PsOptions& options,
                                    const ServeOptions& serve = {});

}  // namespace inac::agent
