// A fixed pool of threads that runs batches of independent tasks: RunAll(n, task) calls task(i)
// for every i in [0, n) on the pool (and on the calling thread) and returns when all have run.
// The switch fleet visits every switch through it each loop pass; the threads live as long as the
// pool, rather than being spawned per pass.
//
// Thread safety: RunAll may be called from one thread at a time (the control loop); the tasks of
// one batch run concurrently and must synchronise what they share.
#pragma once

#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace inac::server {

class WorkerPool {
 public:
  // `threads` >= 1 workers besides the caller of RunAll.
  explicit WorkerPool(int threads);
  // Joins the workers (a batch in progress finishes first).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void RunAll(size_t n, const std::function<void(size_t)>& task);

 private:
  void WorkerMain();
  // Takes the next index of the current batch and runs it; false when none is left.
  bool RunOne();

  absl::Mutex mu_;
  const std::function<void(size_t)>* task_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace inac::server
