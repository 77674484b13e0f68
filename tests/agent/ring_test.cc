// agent/ring.h: ring all-reduce between members over loopback (no switch), each member on its own
// 127.77.9.x address and one UDP port picked per test; exact sums, also with loss.
#include "agent/ring.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/gradient.h"
#include "agent/job_config.h"
#include "agent_fixtures.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

using testing::Loopback;
using testing::PickUdpPort;

struct RingRun {
  std::vector<absl::StatusOr<RingReport>> reports;
  std::vector<std::vector<int32_t>> data;
  std::vector<int32_t> expected;
};

RingRun RunRing(int n, int64_t lanes, double drop_percent, int window = 16) {
  const uint16_t port = PickUdpPort();
  RingRun run;
  run.reports.resize(n, absl::UnknownError("not run"));
  run.data.resize(n);
  run.expected.assign(lanes, 0);
  for (int r = 0; r < n; ++r) {
    run.data[r].resize(lanes);
    FillSynthetic(42, absl::StrCat("w", r), 0, 0, run.data[r]);
    for (int64_t i = 0; i < lanes; ++i) {
      run.expected[i] = static_cast<int32_t>(static_cast<uint32_t>(run.expected[i]) +
                                             static_cast<uint32_t>(run.data[r][i]));
    }
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RingMemberOptions o;
      o.rank = r;
      o.members = n;
      o.tag = 5 * 64 + 63;
      o.port = port;
      o.bind_address = Loopback(77, 9, r + 1);
      o.next_address = Loopback(77, 9, (r + 1) % n + 1);
      o.prev_address = Loopback(77, 9, (r + n - 1) % n + 1);
      o.window = window;
      o.timeout_us = 5000;
      o.linger_ms = 100;
      o.deadline_ms = 60000;
      o.drop_percent = drop_percent;
      o.drop_seed = 100 + r;
      run.reports[r] = RingAllReduce(o, run.data[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

TEST(RingAgentTest, FourMembersSumExactly) {
  // 10,001 lanes: segments of 2500/2500/2500/2501 lanes, not multiples of 62.
  RingRun run = RunRing(4, 10001, 0);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(run.reports[r].ok()) << run.reports[r].status();
    EXPECT_EQ(run.data[r], run.expected) << "member " << r;
    EXPECT_EQ(run.reports[r]->steps, 6);
    // 6 steps of ceil(2500 / 62) or ceil(2501 / 62) = 41 packets.
    EXPECT_EQ(run.reports[r]->data_packets, 6 * 41);
    EXPECT_GT(run.reports[r]->algbw_gbps, 0);
    EXPECT_NEAR(run.reports[r]->busbw_gbps, run.reports[r]->algbw_gbps * 1.5, 1e-9);
  }
}

TEST(RingAgentTest, LossDoesNotBreakExactness) {
  RingRun run = RunRing(3, 5000, 15);
  int64_t retransmissions = 0;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(run.reports[r].ok()) << run.reports[r].status();
    EXPECT_EQ(run.data[r], run.expected) << "member " << r;
    retransmissions += run.reports[r]->retransmissions;
  }
  EXPECT_GT(retransmissions, 0) << "15 % of the sends were dropped";
}

TEST(RingAgentTest, TwoMembersAndTinyGradients) {
  RingRun two = RunRing(2, 63, 10, 1);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(two.reports[r].ok()) << two.reports[r].status();
    EXPECT_EQ(two.data[r], two.expected);
  }
  // Fewer lanes than members: some segments are empty.
  RingRun tiny = RunRing(5, 3, 0);
  for (int r = 0; r < 5; ++r) {
    ASSERT_TRUE(tiny.reports[r].ok()) << tiny.reports[r].status();
    EXPECT_EQ(tiny.data[r], tiny.expected);
  }
}

TEST(RingAgentTest, BadOptionsAreInvalidArgument) {
  std::vector<int32_t> data(10, 1);
  RingMemberOptions o;
  o.members = 3;
  o.rank = 3;
  EXPECT_EQ(RingAllReduce(o, data).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  // No neighbour addresses.
  EXPECT_EQ(RingAllReduce(o, data).status().code(), absl::StatusCode::kInvalidArgument);
  o.members = 1;  // alone: nothing to do, the data is the sum
  auto alone = RingAllReduce(o, data);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(data, std::vector<int32_t>(10, 1));
}

}  // namespace
}  // namespace inac::agent

namespace inac::agent {
namespace {

// The ring fields of GET /jobs/{id}/config (northbound/rest_json.cc) as the agents read them.
TEST(RingAgentTest, MemberOptionsFromTheJobConfig) {
  const char* json = R"({"job_id": 5, "generation": 2, "tags": [], "ring": ["h1", "h3", "h4"],
    "ring_roles": [
      {"worker": "h1", "role": "agent", "prev": {"id": "h4", "address": "10.0.0.4"},
       "next": {"id": "h3", "address": "10.0.0.3"}, "agent": "h1", "tor": "l0",
       "rack_tag": 2147484000},
      {"worker": "h2", "role": "rack-worker", "agent": "h1", "tor": "l0", "rack_tag": 2147484000},
      {"worker": "h3", "role": "member", "prev": {"id": "h1", "address": "10.0.0.1"},
       "next": {"id": "h4", "address": "10.0.0.4"}},
      {"worker": "h4", "role": "member", "prev": {"id": "h3", "address": "10.0.0.3"},
       "next": {"id": "h1", "address": "10.0.0.1"}}]})";
  auto config = ParseJobConfig(json);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generation, 2u);
  EXPECT_EQ(config->ring, (std::vector<std::string>{"h1", "h3", "h4"}));
  ASSERT_EQ(config->ring_roles.size(), 4u);
  EXPECT_EQ(config->ring_roles[1].agent, "h1");
  auto h3 = RingMemberFor(*config, "h3");
  ASSERT_TRUE(h3.ok()) << h3.status();
  EXPECT_EQ(h3->rank, 1);
  EXPECT_EQ(h3->members, 3);
  EXPECT_EQ(h3->tag, (2u << 30) + 5 * 64 + 63);
  EXPECT_EQ(h3->prev_address, *core::ParseIpv4("10.0.0.1"));
  EXPECT_EQ(h3->next_address, *core::ParseIpv4("10.0.0.4"));
  // The agent of an abstract rack is on the ring; a rack worker is not.
  auto h1 = RingMemberFor(*config, "h1");
  ASSERT_TRUE(h1.ok()) << h1.status();
  EXPECT_EQ(h1->rank, 0);
  EXPECT_EQ(h1->next_address, *core::ParseIpv4("10.0.0.3"));
  EXPECT_EQ(RingMemberFor(*config, "h2").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RingMemberFor(*config, "h9").status().code(), absl::StatusCode::kNotFound);
  // Bad input names the field.
  auto bad = ParseJobConfig(
      R"({"job_id": 5, "tags": [], "ring_roles": [{"worker": "h1", "role": "leader"}]})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "ring_roles[0].role")) << bad.status();
  bad = ParseJobConfig(R"({"job_id": 5, "tags": [], "ring_roles": [{"worker": "h1",
    "role": "member", "next": {"id": "h2", "address": "nope"}}]})");
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "ring_roles[0].next.address"))
      << bad.status();
  // A PS job is not a ring job.
  auto ps = ParseJobConfig(R"({"job_id": 5, "tags": []})");
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(RingMemberFor(*ps, "h1").status().code(), absl::StatusCode::kInvalidArgument);
}

// Consecutive all-reduces on the same port: chunk numbers continue (first_chunk), so a member
// still lingering in one never takes the next one's packets for duplicates.
TEST(RingAgentTest, ConsecutiveAllReducesStayExact) {
  const int n = 3;
  const int64_t lanes = 1000;
  const uint16_t port = PickUdpPort();
  std::vector<std::vector<int32_t>> results(n);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int it = 0; it < 3 && status[r].ok(); ++it) {
        std::vector<int32_t> data(lanes);
        FillSynthetic(7, absl::StrCat("w", r), it, 0, data);
        RingMemberOptions o;
        o.rank = r;
        o.members = n;
        o.tag = 9;
        o.port = port;
        o.bind_address = Loopback(77, 10, r + 1);
        o.next_address = Loopback(77, 10, (r + 1) % n + 1);
        o.prev_address = Loopback(77, 10, (r + n - 1) % n + 1);
        o.first_chunk = static_cast<uint32_t>(it) * RingChunksPerAllReduce(lanes, n);
        o.timeout_us = 5000;
        o.linger_ms = 50;
        o.drop_percent = 10;
        o.drop_seed = 10 * r + it;
        auto report = RingAllReduce(o, data);
        status[r] = report.status();
        if (it == 2) results[r] = data;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<int32_t> expected(lanes, 0);
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> data(lanes);
    FillSynthetic(7, absl::StrCat("w", r), 2, 0, data);
    for (int64_t i = 0; i < lanes; ++i) {
      expected[i] =
          static_cast<int32_t>(static_cast<uint32_t>(expected[i]) + static_cast<uint32_t>(data[i]));
    }
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(results[r], expected) << "member " << r;
  }
}

}  // namespace
}  // namespace inac::agent
