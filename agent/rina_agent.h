// The ring roles of a Rina all-reduce job (docs/rina.md, "Host roles"): the ring members (a plain
// member, or the agent of an abstract INA rack) as `inac worker` runs them. A rack's other workers
// (role rack-worker) run agent::RunWorker on RackConfigFor with WorkerOptions::whole_iteration.
//
// Contract, per iteration i (chunk numbers of the ring continue across iterations: first_chunk =
// i * RingChunksPerAllReduce):
//  - member: its gradient (SyntheticLane(seed, worker, i, lane), or `input`) is all-reduced with
//    the other members (agent::RingAllReduce on one socket for the whole run).
//  - agent: it is the PS of its rack's tag (core::RingRackTag; agent::RunPs with
//  PsOptions::reduce):
//    it sums the rack workers' chunks as the ToR forwards them (aggregates, fallbacks, raw) exactly
//    once each; when the whole iteration is in, it adds its own gradient, runs the ring with the
//    other members on the same socket (the rack's packets that arrive meanwhile are read as the PS
//    reads them), and as soon as its sums are final sends every chunk's RESULT to the ToR, which
//    multicasts it to the rack's workers. A rack with no other worker: the agent runs as a member.
//  - check: every lane of the final sums equals the sum of the synthetic gradients of every
//    worker of the job (the workers of `ring_roles`); DataLoss naming the first mismatch.
//  - Failures: InvalidArgument (bad options, not a ring job), NotFound (no role),
//  FailedPrecondition
//    (a rack-worker, or a rack tag missing from the configuration), Unavailable (bind),
//    DeadlineExceeded (the ring stalls for give_up_ms), Cancelled (*stop).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "agent/job_config.h"
#include "agent/ps.h"
#include "agent/report.h"
#include "agent/ring.h"
#include "agent/udp_socket.h"

namespace inac::agent {

struct RinaOptions {
  std::string worker;  // this host's id: a member or agent of the job's ring
  int64_t lanes = 262144;
  int64_t iterations = 1;
  uint64_t seed = 1;
  const std::vector<int32_t>* input = nullptr;  // every iteration's gradient, instead of synthetic
  bool check = false;
  int window = 64;                   // ring packets in flight, >= 1
  int64_t timeout_us = 20000;        // ring retransmission timeout
  int64_t max_timeout_us = 1000000;  // ... doubled per copy up to this
  int64_t give_up_ms = 60000;        // the ring's deadline per iteration
  int64_t linger_ms = 200;           // the ring's linger after the last iteration
  int64_t ps_linger_ms = 2000;       // the agent's rack PS: answering retransmissions at the end
                                     // (longer than the rack workers' --max-timeout-ms)
  bool unicast_results = false;      // the agent's results to every rack worker (no switch: tests)
  SocketOptions socket;
  int netns_fd = -1;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const IterationStats&, const RingReport&)> on_iteration;
  std::vector<int32_t>* result = nullptr;  // receives the last iteration's sums
};

struct RinaReport {
  std::string worker;
  int64_t job_id = 0;
  std::string role;      // "member" or "agent"
  int members = 0;       // n' (ring members)
  int workers = 0;       // every worker of the job
  int rack_workers = 0;  // the agent's rack, without the agent
  int64_t size_bytes = 0;
  std::vector<IterationStats> iterations;  // time: the agent's from the rack's first chunk
  std::vector<RingReport> rings;           // one per iteration
  bool has_rack = false;
  PsReport rack;  // the agent's rack PS
  bool checked = false;
};

// The configuration `worker` runs its rack's tag with: `config` with only the tag of the worker's
// abstract rack (its ring_roles rack_tag); NotFound when the worker has no role or the
// configuration has no such tag, FailedPrecondition when the worker is a plain member.
absl::StatusOr<JobConfig> RackConfigFor(const JobConfig& config, const std::string& worker);

// Every worker of the ring job (ring_roles order): what its sums add up.
std::vector<std::string> RingJobWorkers(const JobConfig& config);

absl::StatusOr<RinaReport> RunRingMember(const JobConfig& config, const RinaOptions& options);

nlohmann::json RinaReportJson(const RinaReport& report);

}  // namespace inac::agent
