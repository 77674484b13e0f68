// Helper process for crash_test.cc: opens the database given as argv[1] and submits jobs in a
// loop (each with its event, one transaction), writing "<id>\n" to stdout only after Create
// returned OK -- i.e. after the commit is durable. Runs until killed. Exit 1 if the open or a write
// fails (the message on stderr).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "storage/sqlite_storage.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: storage_crash_child DB\n");
    return 2;
  }
  auto storage = inac::storage::SqliteStorage::Open(argv[1]);
  if (!storage.ok()) {
    std::fprintf(stderr, "%s\n", std::string(storage.status().message()).c_str());
    return 1;
  }
  inac::core::JobSpec spec;
  spec.name = "crash";
  spec.workers = {"h1", "h2"};
  spec.parameter_servers = {"h3"};
  spec.gradient_bytes = 1 << 20;
  spec.compute_ms = 10;
  spec.iterations = 100;
  spec.batch_size = 32;
  inac::core::Event event;
  event.kind = "job_submitted";
  event.message = "crash test";
  for (int64_t i = 0;; ++i) {
    auto job = (*storage)->jobs().Create(
        spec, i,
        inac::core::IdempotencyKey{std::to_string(getpid()) + "-" + std::to_string(i), "h"},
        {event});
    if (!job.ok()) {
      std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
      return 1;
    }
    std::string line = std::to_string(job->job.id) + "\n";
    // One write(2) per line, no stdio buffering: the parent sees the id as soon as it is durable.
    if (write(STDOUT_FILENO, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return 1;
    }
  }
}
