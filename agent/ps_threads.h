// A PS with several threads (agent/ps.h PsOptions::threads > 1), internal to inac_agent: which
// thread owns a gradient chunk, what the threads share (datagrams handed to a chunk's owner, each
// iteration's progress merged over them) and the run of all the threads. The kernel's steering
// of datagrams to the owner's socket is Ps::SteerToOwners (agent/ps_state.h), in
// agent/ps_threads.cc with the rest.
//
// Contract:
//  - Gradient chunk g belongs to thread (g / kSteeringBlock) mod threads (agent/layout.h
//    kSteeringBlock): whole steering blocks, dealt round-robin.
//  - PsGroup::HandOff copies a datagram into the owner's inbox and wakes the owner (its wake_fd
//    becomes readable); TakeHandedOff takes everything handed to a thread so far. Any thread may
//    call them.
//  - PsGroup::Report takes one thread's share of an iteration; once every thread has reported
//    iteration i (and all before it), the merged iteration (first packet to last completion,
//    counts summed) is recorded and passed to PsOptions::on_iteration, in order, one at a time.
//  - RunThreads runs one Ps per thread on sockets of one SO_REUSEPORT group bound in thread
//    order, and merges their reports (counters summed, the first 100 violations, the fewest
//    iterations done).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/job_config.h"
#include "agent/layout.h"
#include "agent/ps.h"
#include "agent/report.h"
#include "agent/udp_socket.h"

namespace inac::agent {

// Gradient chunk g belongs to thread (g / kSteeringBlock) mod threads of a PS.
inline int OwnerThread(int64_t g, int threads) {
  return static_cast<int>((g / kSteeringBlock) % threads);
}

// What the threads of one PS share (PsOptions::threads > 1): datagrams one thread received for a
// gradient chunk another thread owns, and each iteration's progress, merged over the threads.
class PsGroup {
 public:
  PsGroup(int threads, const PsOptions& options);
  ~PsGroup();
  int threads() const { return static_cast<int>(inbox_.size()); }
  int wake_fd(int thread) const { return inbox_[static_cast<size_t>(thread)].fd; }

  // A copy of `d` for `thread`, which wakes up for it.
  void HandOff(int thread, const DatagramView& d);

  // The datagrams handed to `thread` so far (`out` is replaced).
  void TakeHandedOff(int thread, std::vector<Datagram>* out);

  // One thread's share of iteration s.iteration, which it began at first_us (-1: no packet) and
  // completed at done_us. Once every thread has reported it (iterations in order), the iteration
  // over all of them (first packet to last completion, counts summed) is recorded and passed to
  // options.on_iteration, under the group's lock.
  void Report(const IterationStats& s, int64_t first_us, int64_t done_us);

  std::vector<IterationStats> iterations();

 private:
  struct Inbox {
    std::vector<Datagram> datagrams;  // guarded by mu_
    int fd = -1;
  };
  struct Merge {
    int reported = 0;
    int64_t first_us = -1;
    int64_t done_us = -1;
    IterationStats stats{.contributions = 0, .in_network = 0};
  };
  const PsOptions& options_;
  absl::Mutex mu_;
  std::vector<Inbox> inbox_;
  std::vector<Merge> merge_ ABSL_GUARDED_BY(mu_);
  std::vector<IterationStats> iterations_ ABSL_GUARDED_BY(mu_);
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

// PsOptions::threads > 1: one Ps per thread, each owning the gradient chunks OwnerThread gives it,
// on sockets of one SO_REUSEPORT group bound in thread order (the steering program's indices).
absl::StatusOr<PsReport> RunThreads(const JobConfig& config, const PsOptions& options, int threads);

}  // namespace inac::agent
