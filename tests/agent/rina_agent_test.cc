// agent/rina_agent.h: the host roles of a Rina all-reduce over loopback (no switch): an abstract
// rack (agent + rack workers, the agent summing the rack as its PS and answering each worker
// directly) and plain ring members; every worker's result is the exact sum of every worker's
// synthetic gradient, over several iterations, also with loss.
#include "agent/rina_agent.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/gradient.h"
#include "agent/worker.h"
#include "agent_fixtures.h"
#include "core/ring_intents.h"

namespace inac::agent {
namespace {

using testing::DirectTag;
using testing::Loopback;
using testing::PickUdpPort;

constexpr int64_t kJob = 7;

// One abstract rack (agent "a" with rack workers "r1".."rK") and `plain` members "m1".."mP"; the
// ring is a, m1, ..., mP. Addresses 127.78.5.x.
struct RinaJob {
  JobConfig config;
  std::map<std::string, uint32_t> address;
};

RinaJob MakeJob(int rack_workers, int plain) {
  RinaJob job;
  JobConfig& c = job.config;
  c.job_id = kJob;
  c.generation = 1;
  int host = 1;
  job.address["a"] = Loopback(78, 5, host++);
  std::vector<std::string> rack;
  std::vector<uint32_t> rack_addresses;
  for (int i = 1; i <= rack_workers; ++i) {
    const std::string w = absl::StrCat("r", i);
    job.address[w] = Loopback(78, 5, host++);
    rack.push_back(w);
    rack_addresses.push_back(job.address[w]);
  }
  c.ring = {"a"};
  for (int i = 1; i <= plain; ++i) {
    const std::string m = absl::StrCat("m", i);
    job.address[m] = Loopback(78, 5, host++);
    c.ring.push_back(m);
  }
  const uint32_t rack_tag = core::RingRackTag(kJob, 0, c.generation);
  c.tags.push_back(DirectTag(rack_tag, "a", job.address["a"], 1, 0, 1, rack, rack_addresses));
  const int n = static_cast<int>(c.ring.size());
  for (int i = 0; i < n; ++i) {
    JobConfig::RingRole r;
    r.worker = c.ring[i];
    r.role = i == 0 ? "agent" : "member";
    if (n > 1) {
      r.prev = c.ring[(i + n - 1) % n];
      r.next = c.ring[(i + 1) % n];
      r.prev_address = job.address[r.prev];
      r.next_address = job.address[r.next];
    }
    if (i == 0) {
      r.agent = "a";
      r.tor = "tor";
      r.rack_tag = rack_tag;
    }
    c.ring_roles.push_back(r);
  }
  for (const std::string& w : rack) {
    JobConfig::RingRole r;
    r.worker = w;
    r.role = "rack-worker";
    r.agent = "a";
    r.tor = "tor";
    r.rack_tag = rack_tag;
    c.ring_roles.push_back(r);
  }
  return job;
}

struct Outcome {
  std::map<std::string, absl::Status> status;
  std::map<std::string, std::vector<int32_t>> result;
  std::map<std::string, RinaReport> ring_reports;
  std::map<std::string, WorkerReport> worker_reports;
};

// Runs every host of `job` on its own thread with --check semantics.
Outcome RunJob(const RinaJob& job, int64_t lanes, int64_t iterations, double drop_percent) {
  const uint16_t port = PickUdpPort();
  Outcome out;
  std::vector<std::string> hosts;
  for (const auto& r : job.config.ring_roles) hosts.push_back(r.worker);
  for (const std::string& h : hosts) {
    out.status[h] = absl::UnknownError("not run");
    out.result[h];
    out.ring_reports[h];
    out.worker_reports[h];
  }
  std::vector<std::thread> threads;
  for (const auto& role : job.config.ring_roles) {
    threads.emplace_back([&, role] {
      SocketOptions socket;
      socket.bind_address = job.address.at(role.worker);
      socket.port = port;
      socket.drop_percent = drop_percent;
      socket.drop_seed = socket.bind_address;
      if (role.role == "rack-worker") {
        auto rack = RackConfigFor(job.config, role.worker);
        if (!rack.ok()) {
          out.status[role.worker] = rack.status();
          return;
        }
        WorkerOptions o;
        o.worker = role.worker;
        o.lanes = lanes;
        o.iterations = iterations;
        o.seed = 3;
        o.timeout_ms = 20;
        o.max_timeout_ms = 200;
        o.give_up_ms = 30000;
        o.check = true;
        o.check_workers = RingJobWorkers(job.config);
        o.acknowledged_window = true;
        o.socket = socket;
        o.result = &out.result[role.worker];
        auto report = RunWorker(*rack, o);
        out.status[role.worker] = report.status();
        if (report.ok()) out.worker_reports[role.worker] = *report;
        return;
      }
      RinaOptions o;
      o.worker = role.worker;
      o.lanes = lanes;
      o.iterations = iterations;
      o.seed = 3;
      o.check = true;
      o.window = 16;
      o.timeout_us = 5000;
      o.max_timeout_us = 50000;
      o.give_up_ms = 30000;
      o.linger_ms = 100;
      o.ps_linger_ms = 1000;
      o.unicast_results = true;
      o.socket = socket;
      o.result = &out.result[role.worker];
      auto report = RunRingMember(job.config, o);
      out.status[role.worker] = report.status();
      if (report.ok()) out.ring_reports[role.worker] = *report;
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

std::vector<int32_t> ExpectedSum(const RinaJob& job, int64_t lanes, int64_t iteration) {
  std::vector<int32_t> want(lanes, 0), part(lanes);
  for (const auto& r : job.config.ring_roles) {
    FillSynthetic(3, r.worker, iteration, 0, part);
    for (int64_t i = 0; i < lanes; ++i) {
      want[i] =
          static_cast<int32_t>(static_cast<uint32_t>(want[i]) + static_cast<uint32_t>(part[i]));
    }
  }
  return want;
}

void ExpectExact(const RinaJob& job, const Outcome& out, int64_t lanes, int64_t iterations) {
  const std::vector<int32_t> want = ExpectedSum(job, lanes, iterations - 1);
  for (const auto& [host, status] : out.status) {
    EXPECT_TRUE(status.ok()) << host << ": " << status;
    EXPECT_EQ(out.result.at(host), want) << host << "'s result is not the exact sum";
  }
}

TEST(RinaAgentTest, AgentRackAndPlainMembersSumExactly) {
  const RinaJob job = MakeJob(/*rack_workers=*/2, /*plain=*/2);
  const int64_t lanes = 5000, iterations = 3;
  Outcome out = RunJob(job, lanes, iterations, 0);
  ExpectExact(job, out, lanes, iterations);
  const RinaReport& agent = out.ring_reports.at("a");
  EXPECT_EQ(agent.role, "agent");
  EXPECT_EQ(agent.members, 3);
  EXPECT_EQ(agent.rack_workers, 2);
  EXPECT_TRUE(agent.checked);
  ASSERT_EQ(agent.iterations.size(), 3u);
  EXPECT_EQ(agent.rack.iterations_done, 3);
  // Every rack worker's chunk counted once per iteration (raw: no switch between them).
  const int64_t chunks = (lanes + 61) / 62;
  EXPECT_EQ(agent.rack.counters.contributions, 2 * chunks * iterations);
  EXPECT_EQ(agent.rack.counters.violation, 0);
  EXPECT_TRUE(out.worker_reports.at("r1").checked);
  EXPECT_EQ(out.ring_reports.at("m1").role, "member");
}

TEST(RinaAgentTest, LossDoesNotBreakExactness) {
  const RinaJob job = MakeJob(/*rack_workers=*/3, /*plain=*/1);
  const int64_t lanes = 3000, iterations = 2;
  Outcome out = RunJob(job, lanes, iterations, 5);
  ExpectExact(job, out, lanes, iterations);
  int64_t retransmissions = 0;
  for (const auto& [h, r] : out.worker_reports) retransmissions += r.retransmissions;
  for (const auto& [h, r] : out.ring_reports) {
    for (const RingReport& g : r.rings) retransmissions += g.retransmissions;
  }
  EXPECT_GT(retransmissions, 0) << "5 % loss was injected";
}

// The agent alone in its rack (no tag for it) and a ring of one abstract rack (no ring hops).
TEST(RinaAgentTest, RackWithoutWorkersAndRingOfOneRack) {
  {
    RinaJob job = MakeJob(/*rack_workers=*/0, /*plain=*/2);
    job.config.tags.clear();
    Outcome out = RunJob(job, 700, 2, 0);
    ExpectExact(job, out, 700, 2);
    EXPECT_FALSE(out.ring_reports.at("a").has_rack);
  }
  {
    const RinaJob job = MakeJob(/*rack_workers=*/2, /*plain=*/0);
    Outcome out = RunJob(job, 700, 2, 0);
    ExpectExact(job, out, 700, 2);
    EXPECT_EQ(out.ring_reports.at("a").members, 1);
  }
}

TEST(RinaAgentTest, RolesAndRackConfigs) {
  const RinaJob job = MakeJob(2, 1);
  auto rack = RackConfigFor(job.config, "r2");
  ASSERT_TRUE(rack.ok()) << rack.status();
  ASSERT_EQ(rack->tags.size(), 1u);
  EXPECT_EQ(rack->tags[0].ps, "a");
  EXPECT_EQ(RackConfigFor(job.config, "m1").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RackConfigFor(job.config, "zz").status().code(), absl::StatusCode::kNotFound);
  JobConfig no_tag = job.config;
  no_tag.tags.clear();
  auto missing = RackConfigFor(no_tag, "r1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no tag")) << missing.status();
  // A rack worker is not a ring member; a PS job is not a ring job.
  RinaOptions o;
  o.worker = "r1";
  EXPECT_EQ(RunRingMember(job.config, o).status().code(), absl::StatusCode::kFailedPrecondition);
  JobConfig ps_job;
  ps_job.job_id = 3;
  o.worker = "a";
  EXPECT_EQ(RunRingMember(ps_job, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.iterations = 0;
  EXPECT_EQ(RunRingMember(job.config, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::agent
