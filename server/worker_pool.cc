#include "server/worker_pool.h"

namespace inac::server {

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { WorkerMain(); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::RunOne() {
  const std::function<void(size_t)>* task;
  size_t i;
  {
    absl::MutexLock lock(&mu_);
    if (task_ == nullptr || next_ >= size_) return false;
    task = task_;
    i = next_++;
  }
  (*task)(i);
  absl::MutexLock lock(&mu_);
  ++done_;
  return true;
}

void WorkerPool::WorkerMain() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (task_ != nullptr && next_ < size_);
      };
      mu_.Await(absl::Condition(&work));
      if (stopping_ && (task_ == nullptr || next_ >= size_)) return;
    }
    while (RunOne()) {
    }
  }
}

void WorkerPool::RunAll(size_t n, const std::function<void(size_t)>& task) {
  if (n == 0) return;
  {
    absl::MutexLock lock(&mu_);
    task_ = &task;
    size_ = n;
    next_ = 0;
    done_ = 0;
  }
  while (RunOne()) {
  }
  absl::MutexLock lock(&mu_);
  auto finished = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == n; };
  mu_.Await(absl::Condition(&finished));
  task_ = nullptr;
  size_ = 0;
}

}  // namespace inac::server
