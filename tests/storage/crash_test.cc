// Durability under SIGKILL (docs/storage.md "Durability"): a real child process
// (storage_crash_child) submits jobs in a loop and prints each id only after its commit returned;
// the parent kills it with SIGKILL at random moments (after a random number of acknowledgements
// plus a random jitter), 30 rounds, reopening the file after each round and checking that every
// printed id is present and that PRAGMA integrity_check says ok. No timing is asserted: the random
// delays only choose where the kill lands.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "storage/maintenance.h"
#include "storage/sqlite_storage.h"
#include "tests/storage/test_util.h"

extern char** environ;

namespace inac::storage {
namespace {

struct ChildRun {
  std::vector<core::JobId> ids;  // complete lines only
  std::string stderr_text;
  int wait_status = 0;
};

// Starts the child on `db`, waits until it has acknowledged `ids_before_kill` jobs (or ended),
// lets it run `jitter` longer so the kill lands anywhere in its loop (mid-transaction, mid-fsync,
// between commit and print), SIGKILLs it and collects what it printed. Waiting for a count rather
// than a time keeps the test meaningful on a loaded machine.
ChildRun RunAndKill(const std::string& db, int ids_before_kill, std::chrono::microseconds jitter) {
  ChildRun run;
  int out[2];
  if (pipe(out) != 0) return run;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string exe = STORAGE_CRASH_CHILD_PATH;
  char* argv[] = {exe.data(), const_cast<char*>(db.c_str()), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    run.stderr_text = "posix_spawn failed";
    return run;
  }
  // Drain the pipe while the child runs so it never blocks on a full pipe.
  std::mutex mu;
  std::condition_variable cv;
  std::string text;
  int lines = 0;
  bool eof = false;
  std::thread drain([&] {
    char buffer[4096];
    ssize_t n;
    while ((n = read(out[0], buffer, sizeof(buffer))) > 0) {
      std::lock_guard<std::mutex> l(mu);
      text.append(buffer, n);
      lines += static_cast<int>(std::count(buffer, buffer + n, '\n'));
      cv.notify_all();
    }
    std::lock_guard<std::mutex> l(mu);
    eof = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return eof || lines >= ids_before_kill; });
  }
  std::this_thread::sleep_for(jitter);
  kill(pid, SIGKILL);
  waitpid(pid, &run.wait_status, 0);
  drain.join();
  close(out[0]);
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    run.ids.push_back(std::stoll(text.substr(start, nl - start)));
  }
  return run;
}

TEST(CrashTest, EveryAcknowledgedJobSurvivesSigkill) {
  testing::TempDir dir;
  std::string db = dir.File("crash.db");
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> ids_before_kill(0, 12);
  std::uniform_int_distribution<int> jitter_us(0, 3000);
  std::set<core::JobId> acknowledged;
  int rounds_with_writes = 0;
  for (int round = 0; round < 30; ++round) {
    ChildRun run = RunAndKill(db, ids_before_kill(rng), std::chrono::microseconds(jitter_us(rng)));
    ASSERT_TRUE(WIFSIGNALED(run.wait_status) && WTERMSIG(run.wait_status) == SIGKILL)
        << "round " << round << ": child ended on its own (status " << run.wait_status << ")";
    rounds_with_writes += run.ids.empty() ? 0 : 1;
    acknowledged.insert(run.ids.begin(), run.ids.end());

    auto storage = SqliteStorage::Open(db);
    ASSERT_TRUE(storage.ok()) << "round " << round << ": " << storage.status();
    for (core::JobId id : acknowledged) {
      auto job = (*storage)->jobs().Get(id);
      ASSERT_TRUE(job.ok()) << "round " << round << ": acknowledged job " << id
                            << " lost: " << job.status();
    }
    // Every job has its event (they were one transaction).
    auto page = (*storage)->jobs().List({.limit = 10'000'000});
    ASSERT_TRUE(page.ok());
    auto events = (*storage)->events().List({.limit = 10'000'000});
    ASSERT_TRUE(events.ok());
    EXPECT_EQ(page->jobs.size(), events->size()) << "round " << round;
    storage->reset();

    auto report = CheckDatabase(db);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->integrity, std::vector<std::string>{"ok"}) << "round " << round;
  }
  // The kills landed while jobs were being written (the child is killed only after its first
  // acknowledgements in most rounds), or the test would prove nothing.
  EXPECT_GT(rounds_with_writes, 20);
}

}  // namespace
}  // namespace inac::storage
