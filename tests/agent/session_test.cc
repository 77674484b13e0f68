// Client sessions over loopback, no switch: a serving PS (agent/ps_serve.h) per PS of the job and
// one WorkerSession per member, each on its own 127.78.b.x address with one UDP port per test.
// All-reduces of many sizes in sequence, with and without loss, two PSs splitting the gradient,
// and new sessions after the first ones closed; every sum checked exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "agent/ps_serve.h"
#include "agent/worker.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

using testing::DirectTag;
using testing::Loopback;
using testing::PickUdpPort;

// Member m's value at lane i of all-reduce r: distinct per member, lane and call.
int32_t Value(int m, int r, int64_t i) {
  return static_cast<int32_t>((m + 1) * 1000003 + r * 7919 + i * 31) % 2000001 - 1000000;
}

class ServingPsFixture {
 public:
  ServingPsFixture(const JobConfig& config, uint16_t port, double drop_percent = 0) {
    std::map<std::string, uint32_t> pss;
    for (const auto& t : config.tags) pss[t.ps] = t.ps_address;
    options_.resize(pss.size());
    reports_.resize(pss.size(), absl::UnknownError("not run"));
    size_t i = 0;
    for (const auto& [name, address] : pss) {
      PsOptions& o = options_[i];
      o.ps = name;
      o.unicast_results = true;
      o.stop = &stop_;
      o.socket = SocketOptions{address, port, drop_percent, address};
      threads_.emplace_back([this, config, i] { reports_[i] = ServePs(config, options_[i]); });
      ++i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the sockets are bound
  }
  // Stops the PSs and returns their reports.
  std::vector<absl::StatusOr<ServeReport>> Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    return reports_;
  }
  ~ServingPsFixture() {
    if (!threads_.empty()) Stop();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<PsOptions> options_;
  std::vector<absl::StatusOr<ServeReport>> reports_;
  std::vector<std::thread> threads_;
};

JobConfig TwoPsConfig(int members, int b) {
  std::vector<std::string> names;
  std::vector<uint32_t> addresses;
  for (int m = 0; m < members; ++m) {
    names.push_back("w" + std::to_string(m));
    addresses.push_back(Loopback(78, b, 11 + m));
  }
  JobConfig c;
  c.job_id = 7;
  c.plan_version = 1;
  c.tags.push_back(DirectTag(40, "ps0", Loopback(78, b, 1), 0.5, 0, 1, names, addresses));
  c.tags.push_back(DirectTag(41, "ps1", Loopback(78, b, 2), 0.5, 0, 1, names, addresses));
  return c;
}

// Every member all-reduces `sizes` in order in one session; the sums are checked.
// Member m starts start_delay_ms[m] after the others (if given).
void RunSessions(const JobConfig& config, uint16_t port, const std::vector<int64_t>& sizes,
                 double drop_percent, int round, const std::vector<int>& start_delay_ms = {}) {
  const int members = static_cast<int>(config.tags[0].members.size());
  std::vector<absl::Status> status(members);
  std::vector<std::vector<std::vector<int32_t>>> got(members);
  std::vector<std::thread> threads;
  for (int m = 0; m < members; ++m) {
    threads.emplace_back([&, m] {
      if (static_cast<size_t>(m) < start_delay_ms.size()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(start_delay_ms[m]));
      }
      WorkerOptions o;
      o.worker = config.tags[0].members[m].worker;
      o.give_up_ms = 20000;
      o.max_timeout_ms = 200;
      const uint32_t address = config.tags[0].members[m].address;
      o.socket = SocketOptions{address, port, drop_percent, address + 17};
      auto session = OpenWorkerSession(config, o);
      if (!session.ok()) {
        status[m] = session.status();
        return;
      }
      for (size_t r = 0; r < sizes.size(); ++r) {
        std::vector<int32_t> buf(static_cast<size_t>(sizes[r]));
        for (int64_t i = 0; i < sizes[r]; ++i) buf[i] = Value(m, round * 100 + r, i);
        IterationStats s;
        if (absl::Status st = (*session)->AllReduce(buf.data(), sizes[r], &s); !st.ok()) {
          status[m] = st;
          return;
        }
        got[m].push_back(std::move(buf));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int m = 0; m < members; ++m) {
    ASSERT_TRUE(status[m].ok()) << "member " << m << ": " << status[m];
    ASSERT_EQ(got[m].size(), sizes.size());
    for (size_t r = 0; r < sizes.size(); ++r) {
      for (int64_t i = 0; i < sizes[r]; ++i) {
        int32_t want = 0;
        for (int k = 0; k < members; ++k) {
          want = static_cast<int32_t>(static_cast<uint32_t>(want) +
                                      static_cast<uint32_t>(Value(k, round * 100 + r, i)));
        }
        ASSERT_EQ(got[m][r][i], want) << "member " << m << ", all-reduce " << r << " of "
                                      << sizes[r] << " values, lane " << i;
      }
    }
  }
}

const std::vector<int64_t> kSizes = {1, 61, 62, 63, 1000, 100000, 7, 4096};

TEST(SessionTest, AllReducesOfAnySizeSumExactlyOverTwoPss) {
  const uint16_t port = PickUdpPort();
  const JobConfig config = TwoPsConfig(3, 1);
  ServingPsFixture pss(config, port);
  RunSessions(config, port, kSizes, 0, 0);
  for (const auto& r : pss.Stop()) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->chunks_completed, 0);
    EXPECT_EQ(r->ps.counters.violation, 0);
    EXPECT_EQ(r->sessions, 1);
  }
}

TEST(SessionTest, LossIsRepairedAndSumsStayExact) {
  const uint16_t port = PickUdpPort();
  const JobConfig config = TwoPsConfig(3, 2);
  ServingPsFixture pss(config, port, /*drop_percent=*/3);
  RunSessions(config, port, kSizes, 3, 0);
  for (const auto& r : pss.Stop()) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->ps.counters.retransmit, 0);
    EXPECT_GT(r->ps.counters.results_resent, 0);
  }
}

TEST(SessionTest, NewSessionsOfTheJobAreToldFromOldResults) {
  const uint16_t port = PickUdpPort();
  const JobConfig config = TwoPsConfig(2, 3);
  ServingPsFixture pss(config, port);
  RunSessions(config, port, {100, 1000}, 0, 0);
  // The training restarts: new sessions number their chunks from 0 again, with other values.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  RunSessions(config, port, {100, 1000}, 0, 1);
  for (const auto& r : pss.Stop()) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sessions, 2);
  }
}

TEST(SessionTest, AMemberThatNeverSendsTimesOutTheOthersAndTheNumberingStaysInStep) {
  const uint16_t port = PickUdpPort();
  const JobConfig config = TwoPsConfig(2, 4);
  ServingPsFixture pss(config, port);
  WorkerOptions o;
  o.worker = "w0";
  o.give_up_ms = 300;
  o.socket = SocketOptions{Loopback(78, 4, 11), port, 0, 1};
  auto session = OpenWorkerSession(config, o);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<int32_t> buf(500, 1);
  absl::Status s = (*session)->AllReduce(buf.data(), 500, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("no result"), std::string::npos) << s;
  EXPECT_EQ((*session)->next_chunk(), 9);  // ceil(500 / 62): in step with members that ran it
  (*session)->Skip(63);
  EXPECT_EQ((*session)->next_chunk(), 11);
}

TEST(SessionTest, PartialSumsOfAFailedSessionDoNotPoisonTheNext) {
  const uint16_t port = PickUdpPort();
  const JobConfig config = TwoPsConfig(2, 6);
  ServingPsFixture pss(config, port);
  {
    // w0 alone: its chunks wait at the PSs for w1, which never comes; it gives up.
    WorkerOptions o;
    o.worker = "w0";
    o.give_up_ms = 300;
    o.socket = SocketOptions{Loopback(78, 6, 11), port, 0, 1};
    auto session = OpenWorkerSession(config, o);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<int32_t> buf(1000, 5);
    ASSERT_FALSE((*session)->AllReduce(buf.data(), 1000, nullptr).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  // The same chunk numbers, exact: w1 (whom the stale sums lack) first, w0 (whom they count)
  // 300 ms later.
  RunSessions(config, port, {1000, 1000}, 0, 2, {300, 0});
  int64_t restarted = 0;
  for (const auto& r : pss.Stop()) {
    ASSERT_TRUE(r.ok()) << r.status();
    restarted += r->stale_restarted;
  }
  EXPECT_GT(restarted, 0);
}

TEST(SessionTest, BadBuffersAndStrangersAreRefused) {
  const JobConfig config = TwoPsConfig(2, 5);
  WorkerOptions o;
  o.worker = "nobody";
  o.socket = SocketOptions{Loopback(78, 5, 11), PickUdpPort(), 0, 1};
  EXPECT_EQ(OpenWorkerSession(config, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.worker = "w0";
  auto session = OpenWorkerSession(config, o);
  ASSERT_TRUE(session.ok()) << session.status();
  int32_t one = 1;
  EXPECT_EQ((*session)->AllReduce(&one, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::agent
