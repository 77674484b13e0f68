// A PS and workers over loopback, no switch: each agent binds its own 127.77.b.x address with
// one UDP port picked per test; the workers' aggregation node is the PS, so their raw chunks go
// straight to it and it unicasts every result to every member (--unicast-results). The sums are
// checked exactly (WorkerOptions::check), also with a deterministic loss of sent packets. A
// scripted PS checks the worker's side of the contract: slots, windows, retransmissions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "agent/clock.h"
#include "agent/gradient.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/ps.h"
#include "agent/udp_socket.h"
#include "agent/worker.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

using testing::DirectTag;
using testing::Loopback;
using testing::PickUdpPort;

struct AgentRun {
  std::vector<absl::StatusOr<PsReport>> ps;
  std::vector<absl::StatusOr<WorkerReport>> workers;
  std::vector<std::vector<int32_t>> results;
};

// Runs one PS agent per distinct PS of `config` (bound to its ps_address) and one worker agent
// per member, all on `port`, until they finish.
// With `feed`, every agent follows the configurations published there, and `on_iteration(i)`
// runs when the first worker finished its iteration i.
AgentRun RunAll(const JobConfig& config, uint16_t port, int64_t lanes, int64_t iterations,
                double drop_percent, uint32_t window = 0, const ConfigFeed* feed = nullptr,
                std::function<void(int64_t)> on_iteration = nullptr, int ps_threads = 1) {
  std::map<std::string, uint32_t> pss;
  std::map<std::string, uint32_t> workers;
  for (const auto& t : config.tags) {
    pss[t.ps] = t.ps_address;
    for (const auto& m : t.members) workers[m.worker] = m.address;
  }
  AgentRun run;
  run.ps.resize(pss.size(), absl::UnknownError("not run"));
  run.workers.resize(workers.size(), absl::UnknownError("not run"));
  run.results.resize(workers.size());
  std::vector<PsOptions> ps_options(pss.size());
  std::vector<WorkerOptions> worker_options(workers.size());
  std::vector<std::thread> threads;
  size_t i = 0;
  for (const auto& [name, address] : pss) {
    PsOptions& o = ps_options[i];
    o.ps = name;
    o.lanes = lanes;
    o.iterations = iterations;
    o.duration_ms = 90000;  // a bound, never reached when all goes well
    // The PS leaves once no packet arrived for linger_ms. A worker whose last result was lost
    // retransmits within max_timeout_ms (200 ms); the margin above that absorbs a loaded CI
    // machine not scheduling the worker's thread in time.
    o.linger_ms = 1000;
    o.unicast_results = true;
    o.window = window;
    o.updates = feed;
    o.threads = ps_threads;
    o.socket = SocketOptions{address, port, drop_percent, address};
    threads.emplace_back([&, i] { run.ps[i] = RunPs(config, ps_options[i]); });
    ++i;
  }
  i = 0;
  for (const auto& [name, address] : workers) {
    WorkerOptions& o = worker_options[i];
    o.worker = name;
    o.lanes = lanes;
    o.iterations = iterations;
    o.seed = 42;
    o.window = window;
    o.check = true;
    o.timeout_ms = 5;
    o.max_timeout_ms = 200;
    o.give_up_ms = 30000;
    o.socket = SocketOptions{address, port, drop_percent, address};
    o.result = &run.results[i];
    o.updates = feed;
    if (i == 0 && on_iteration) {
      o.on_iteration = [&](const IterationStats& s) { on_iteration(s.iteration); };
    }
    threads.emplace_back([&, i] { run.workers[i] = RunWorker(config, worker_options[i]); });
    ++i;
  }
  for (std::thread& t : threads) t.join();
  return run;
}

JobConfig OnePsThreeWorkers(int b) {
  JobConfig c;
  c.job_id = 5;
  c.tags = {DirectTag(320, "ps", Loopback(77, b, 1), 1, 0, 1, {"w1", "w2", "w3"},
                      {Loopback(77, b, 2), Loopback(77, b, 3), Loopback(77, b, 4)})};
  return c;
}

TEST(LoopbackTest, PsAndThreeWorkersSumExactly) {
  const JobConfig c = OnePsThreeWorkers(1);
  const int64_t lanes = 25000;  // 404 chunks, the last one 14 lanes
  AgentRun run = RunAll(c, PickUdpPort(), lanes, 3, 0);
  ASSERT_EQ(run.ps.size(), 1u);
  ASSERT_TRUE(run.ps[0].ok()) << run.ps[0].status();
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    EXPECT_EQ(w->iterations.size(), 3u);
    EXPECT_EQ(w->results, 3 * 404);
    EXPECT_EQ(w->workers, 3);
  }
  const PsReport& ps = *run.ps[0];
  EXPECT_TRUE(ps.complete);
  EXPECT_EQ(ps.iterations_done, 3);
  EXPECT_EQ(ps.iterations.size(), 3u);
  EXPECT_EQ(ps.counters.contributions, 3 * 3 * 404);
  EXPECT_EQ(ps.counters.in_network, 0);  // no switch: every contribution came alone
  EXPECT_EQ(ps.counters.violation, 0);
  EXPECT_EQ(ps.counters.results_sent, 3 * 404);
  EXPECT_EQ(ps.size_bytes, lanes * 4);
  // Independent of --check: the last iteration's sum, lane by lane.
  for (int64_t l = 0; l < lanes; l += 97) {
    const int32_t want = SyntheticLane(42, "w1", 2, l) + SyntheticLane(42, "w2", 2, l) +
                         SyntheticLane(42, "w3", 2, l);
    for (const auto& r : run.results) ASSERT_EQ(r[static_cast<size_t>(l)], want) << l;
  }
}

TEST(LoopbackTest, ExactUnderLossWithRetransmissions) {
  const JobConfig c = OnePsThreeWorkers(2);
  AgentRun run = RunAll(c, PickUdpPort(), 6200, 2, 5.0);
  ASSERT_TRUE(run.ps[0].ok()) << run.ps[0].status();
  int64_t retransmissions = 0, dropped = 0;
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    retransmissions += w->retransmissions;
    dropped += w->dropped_by_hook;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_GT(retransmissions, 0);
  const PsReport& ps = *run.ps[0];
  EXPECT_TRUE(ps.complete);
  EXPECT_GT(ps.counters.retransmit, 0);
  EXPECT_EQ(ps.counters.contributions, 3 * 2 * 100);  // each counted once despite copies
  EXPECT_EQ(ps.counters.violation, 0);
}

// A PS with three threads (each owning blocks of gradient chunks, the kernel steering each
// datagram to its owner) under loss and a re-plan that changes the tag: every sum exact, every
// contribution counted once, iterations merged over the threads.
TEST(LoopbackTest, ThreadedPsSumsExactlyUnderLossAndAReplan) {
  const JobConfig c = OnePsThreeWorkers(8);
  JobConfig next = c;
  next.plan_version = 2;
  next.tags[0].tag += 1u << 30;
  ConfigFeed feed;
  const int64_t lanes = 25000;  // 404 chunks: 7 steering blocks
  AgentRun run = RunAll(
      c, PickUdpPort(), lanes, 3, 2.0, /*window=*/0, &feed,
      [&](int64_t it) {
        if (it == 0) feed.Publish(next);
      },
      /*ps_threads=*/3);
  ASSERT_TRUE(run.ps[0].ok()) << run.ps[0].status();
  const PsReport& ps = *run.ps[0];
  EXPECT_TRUE(ps.complete);
  EXPECT_EQ(ps.threads, 3);
  EXPECT_TRUE(ps.steered);
  EXPECT_EQ(ps.iterations_done, 3);
  ASSERT_EQ(ps.iterations.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ps.iterations[i].iteration, i);
    EXPECT_EQ(ps.iterations[i].contributions, 3 * 404);
  }
  EXPECT_EQ(ps.counters.contributions, 3 * 3 * 404);
  EXPECT_EQ(ps.counters.violation, 0);
  EXPECT_EQ(ps.plans, (std::vector<int64_t>{0, 2}));
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    EXPECT_GT(w->retransmissions, 0);
  }
}

// A GSO send that spans two steering blocks reaches one thread of a threaded PS whole: the
// thread hands the other block's datagrams to their owner, and every chunk is still answered
// with its exact sum.
TEST(LoopbackTest, ThreadedPsHandsOffWhatTheKernelDeliveredElsewhere) {
  const int b = 9;
  JobConfig c;
  c.job_id = 9;
  c.tags = {DirectTag(576, "ps", Loopback(77, b, 1), 1, 0, 1, {"w1"}, {Loopback(77, b, 2)})};
  const uint16_t port = PickUdpPort();
  std::atomic<bool> stop{false};
  PsOptions o;
  o.ps = "ps";
  o.lanes = 128 * kLanes;  // chunks 0..127: steering blocks 0 and 1
  o.iterations = 1;
  o.duration_ms = 20000;  // a bound if the test fails
  o.unicast_results = true;
  o.threads = 2;
  o.stop = &stop;
  o.socket = SocketOptions{Loopback(77, b, 1), port};
  absl::StatusOr<PsReport> report = absl::UnknownError("not run");
  std::thread ps([&] { report = RunPs(c, o); });
  auto sender = UdpSocket::Open(SocketOptions{Loopback(77, b, 2), port});
  ASSERT_TRUE(sender.ok()) << sender.status();
  // Chunks 32..95 in one group: one GSO send whose first datagram is block 0's.
  std::map<uint32_t, int32_t> answered;
  for (int attempt = 0; attempt < 50 && answered.size() < 64; ++attempt) {
    for (uint32_t k = 32; k < 96; ++k) {
      if (answered.count(k)) continue;
      InaPacket p;
      p.tag = 576;
      p.chunk = k;
      p.count = 1;
      p.lanes.fill(static_cast<int32_t>(k) * 3);
      ASSERT_TRUE((*sender)->Queue(Loopback(77, b, 1), port, EncodePacket(p)).ok());
    }
    const int64_t until = NowUs() + 200000;
    while (answered.size() < 64 && NowUs() < until) {
      if (!(*sender)->Wait(20000)) continue;
      Datagram d;
      while ((*sender)->TryReceive(&d)) {
        auto r = DecodePacket(d.payload());
        if (r.ok() && (r->flags & kFlagResult)) answered[r->chunk] = r->lanes[kLanes - 1];
      }
    }
  }
  stop = true;
  ps.join();
  ASSERT_EQ(answered.size(), 64u);
  for (const auto& [k, lane] : answered) EXPECT_EQ(lane, static_cast<int32_t>(k) * 3) << k;
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->counters.contributions, 64);
  if ((*sender)->gso_active()) {
    EXPECT_GE(report->counters.handed_off, 32);
  }
}

// A re-plan between the first worker's first and second iteration gives the tag a new value
// (another generation): the others may still be in their first iteration, with chunks in flight
// under the old value. Every sum stays exact and every agent runs under both plans.
TEST(LoopbackTest, AgentsFollowAReplanThatChangesTheTag) {
  const JobConfig c = OnePsThreeWorkers(4);
  JobConfig next = c;
  next.plan_version = 2;
  next.tags[0].tag += 1u << 30;
  ConfigFeed feed;
  AgentRun run = RunAll(c, PickUdpPort(), 12400, 3, 1.0, /*window=*/8, &feed, [&](int64_t it) {
    if (it == 0) feed.Publish(next);
  });
  ASSERT_TRUE(run.ps[0].ok()) << run.ps[0].status();
  EXPECT_TRUE(run.ps[0]->complete);
  EXPECT_EQ(run.ps[0]->counters.contributions, 3 * 3 * 200);
  EXPECT_EQ(run.ps[0]->counters.violation, 0);
  EXPECT_EQ(run.ps[0]->plans, (std::vector<int64_t>{0, 2}));
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    EXPECT_EQ(w->plans, (std::vector<int64_t>{0, 2}));
  }
}

// Two re-plans that cut the gradient into other chunk ranges (as grid-split re-plans do), each
// published when the first worker finished an iteration, so the others are still in it with
// chunks in flight under the old tags: PS psb's shard goes from one range to three, then to two
// others; psc's stays whole but changes its tag. Every sum stays exact, under loss.
TEST(LoopbackTest, AgentsFollowReplansThatRecutTheGradient) {
  const int b = 5;
  const std::vector<std::string> names = {"w1", "w2", "w3"};
  const std::vector<uint32_t> addresses = {Loopback(77, b, 2), Loopback(77, b, 3),
                                           Loopback(77, b, 4)};
  const uint32_t psb = Loopback(77, b, 11), psc = Loopback(77, b, 12);
  constexpr uint32_t kGen = 1u << 30;
  JobConfig c;
  c.job_id = 7;
  c.tags = {DirectTag(448, "psb", psb, 0.6, 0, 1, names, addresses),
            DirectTag(456, "psc", psc, 0.4, 0, 1, names, addresses)};
  JobConfig second;
  second.job_id = 7;
  second.plan_version = 2;
  second.tags = {DirectTag(449 + kGen, "psb", psb, 0.6, 0.3, 0.7, names, addresses),
                 DirectTag(448 + kGen, "psb", psb, 0.6, 0, 0.3, names, addresses),
                 DirectTag(456 + kGen, "psc", psc, 0.4, 0, 1, names, addresses),
                 DirectTag(450 + kGen, "psb", psb, 0.6, 0.7, 1, names, addresses)};
  JobConfig third;
  third.job_id = 7;
  third.plan_version = 3;
  third.tags = {DirectTag(448 + 2 * kGen, "psb", psb, 0.6, 0, 0.55, names, addresses),
                DirectTag(456 + 2 * kGen, "psc", psc, 0.4, 0, 1, names, addresses),
                DirectTag(449 + 2 * kGen, "psb", psb, 0.6, 0.55, 1, names, addresses)};
  ConfigFeed feed;
  AgentRun run = RunAll(c, PickUdpPort(), 31000, 4, 1.0, /*window=*/8, &feed, [&](int64_t it) {
    if (it == 0) feed.Publish(second);
    if (it == 1) feed.Publish(third);
  });
  ASSERT_EQ(run.ps.size(), 2u);
  int64_t contributions = 0;
  for (const auto& p : run.ps) {
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->complete);
    EXPECT_EQ(p->counters.violation, 0);
    EXPECT_EQ(p->plans, (std::vector<int64_t>{0, 2, 3}));
    contributions += p->counters.contributions;
  }
  EXPECT_EQ(contributions, 3 * 4 * 500);  // 31000 lanes = 500 chunks, 3 workers, 4 iterations
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    EXPECT_EQ(w->plans, (std::vector<int64_t>{0, 2, 3}));
    EXPECT_EQ(w->iterations.size(), 4u);
  }
}

TEST(LoopbackTest, TwoPssAndSplitRangesWithASmallWindow) {
  const int b = 3;
  const std::vector<std::string> names = {"w1", "w2", "w3"};
  const std::vector<uint32_t> addresses = {Loopback(77, b, 2), Loopback(77, b, 3),
                                           Loopback(77, b, 4)};
  JobConfig c;
  c.job_id = 6;
  c.tags = {DirectTag(385, "psb", Loopback(77, b, 11), 0.7, 0.4, 1, names, addresses),
            DirectTag(392, "psc", Loopback(77, b, 12), 0.3, 0, 1, names, addresses),
            DirectTag(384, "psb", Loopback(77, b, 11), 0.7, 0, 0.4, names, addresses)};
  AgentRun run = RunAll(c, PickUdpPort(), 10007, 2, 0, /*window=*/4);
  ASSERT_EQ(run.ps.size(), 2u);
  int64_t contributions = 0;
  for (const auto& p : run.ps) {
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->complete);
    contributions += p->counters.contributions;
  }
  EXPECT_EQ(contributions, 3 * 2 * 162);  // ceil(10007 / 62) chunks, 3 workers, 2 iterations
  for (const auto& w : run.workers) {
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->checked);
    EXPECT_EQ(w->tags, 3);
  }
}

// The test plays the PS: it receives one worker's packets and answers them by hand.
class ScriptedPs {
 public:
  explicit ScriptedPs(uint32_t address, uint16_t port) {
    auto s = UdpSocket::Open(SocketOptions{address, port});
    EXPECT_TRUE(s.ok()) << s.status();
    socket_ = std::move(*s);
  }
  // The next INA packet within `within_ms` (10 s), or nullopt.
  std::optional<std::pair<InaPacket, uint32_t>> Next(int within_ms = 10000) {
    for (int i = 0; i < within_ms / 10; ++i) {
      Datagram d;
      if (socket_->TryReceive(&d)) {
        auto p = DecodePacket(d.payload());
        EXPECT_TRUE(p.ok());
        if (p.ok()) return std::make_pair(*p, d.source);
      }
      socket_->Wait(10000);
    }
    return std::nullopt;
  }
  void Answer(const InaPacket& chunk, uint32_t to, uint16_t port) {
    InaPacket r = chunk;
    r.flags = kFlagResult;
    r.count = 1;
    ASSERT_TRUE(socket_->Send(to, port, EncodePacket(r)).ok());
  }

 private:
  std::unique_ptr<UdpSocket> socket_;
};

// Job 9: worker w1 (127.77.b.2) alone in tag 576 toward a PS at 127.77.b.1, aggregated at s1
// whose region for the tag is `count` aggregators from `base`, the workers' window at `offset`
// of `window` aggregators.
JobConfig OneWorkerAtS1(int b, uint32_t base, uint32_t count, uint32_t offset, uint32_t window) {
  JobConfig c;
  c.job_id = 9;
  JobConfig::Tag t =
      DirectTag(576, "ps", Loopback(77, b, 1), 1, 0, 1, {"w1"}, {Loopback(77, b, 2)});
  t.members[0].aggregation_node = "s1";
  t.aggregators.push_back({"s1", Loopback(77, b, 10), {"w1"}, base, count, offset, window});
  c.tags = {t};
  return c;
}

TEST(WorkerContractTest, SlotsWindowAndRetransmission) {
  const int b = 4;
  const uint16_t port = PickUdpPort();
  const JobConfig c = OneWorkerAtS1(b, 100, 10, 7, 4);
  ScriptedPs ps(Loopback(77, b, 1), port);
  WorkerOptions o;
  o.worker = "w1";
  o.lanes = 12 * 62;  // 12 chunks
  o.iterations = 2;
  o.timeout_ms = 20;
  o.give_up_ms = 20000;
  o.socket = SocketOptions{Loopback(77, b, 2), port};
  absl::StatusOr<WorkerReport> report = absl::UnknownError("not run");
  std::thread worker([&] { report = RunWorker(c, o); });

  std::set<uint32_t> answered, outstanding;
  bool withheld = false;
  int retransmitted = 0;
  while (answered.size() < 24) {
    auto next = ps.Next();
    ASSERT_TRUE(next.has_value()) << "no packet from the worker";
    const InaPacket& p = next->first;
    EXPECT_EQ(next->second, Loopback(77, b, 2));
    EXPECT_EQ(p.tag, 576u);
    EXPECT_EQ(p.count, 1);
    EXPECT_EQ(p.bitmap, 0u);
    EXPECT_EQ(p.slot, (7 + p.chunk % 4) % 10) << p.chunk;
    if (p.flags == kFlagRetransmit) {
      ++retransmitted;
    } else {
      EXPECT_EQ(p.flags, 0);
      EXPECT_FALSE(answered.count(p.chunk));
      outstanding.insert(p.chunk);
      // Sliding window of 4: chunk c + 4 only after the result of c.
      if (p.chunk % 12 >= 4) {
        EXPECT_TRUE(answered.count(p.chunk - 4)) << p.chunk;
      }
    }
    if (p.chunk == 2 && !withheld) {
      withheld = true;  // lose the first copy of chunk 2: the worker must send it again
      continue;
    }
    ps.Answer(p, Loopback(77, b, 2), port);
    answered.insert(p.chunk);
    outstanding.erase(p.chunk);
  }
  worker.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(retransmitted, 1);
  EXPECT_GE(report->retransmissions, 1);
  EXPECT_EQ(report->iterations.size(), 2u);
}

// Congestion control: a grant of 64 is an upper bound, not a burst -- with nothing answered the
// worker sends exactly the initial congestion window and, without any result (no loss evidence,
// the RTO still at 1 s), nothing again; a chunk whose result is withheld while three chunks sent
// after it are answered is sent again at once (fast retransmit), long before its timeout.
TEST(WorkerContractTest, CongestionWindowStartsSmallAndFastRetransmitsOnLaterResults) {
  const int b = 6;
  const uint16_t port = PickUdpPort();
  const JobConfig c = OneWorkerAtS1(b, 0, 100, 0, 64);  // grant 64
  ScriptedPs ps(Loopback(77, b, 1), port);
  WorkerOptions o;
  o.worker = "w1";
  o.lanes = 200 * 62;  // 200 chunks
  o.timeout_ms = 20;
  o.max_timeout_ms = 5000;
  o.give_up_ms = 20000;
  o.socket = SocketOptions{Loopback(77, b, 2), port};
  absl::StatusOr<WorkerReport> report = absl::UnknownError("not run");
  std::thread worker([&] { report = RunWorker(c, o); });

  // Nothing answered for 300 ms: the initial window, once.
  std::vector<InaPacket> first;
  const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < quiet_until) {
    auto next = ps.Next(/*within_ms=*/20);
    if (!next.has_value()) continue;
    first.push_back(next->first);
    if (first.size() > kInitialCongestionWindow) break;
  }
  ASSERT_EQ(first.size(), kInitialCongestionWindow);
  for (size_t k = 0; k < first.size(); ++k) {
    EXPECT_EQ(first[k].chunk, k);
    EXPECT_EQ(first[k].flags, 0);
    EXPECT_EQ(first[k].slot, k % 64);
  }
  // Answer everything from now on except chunk 10's first copy.
  std::set<uint32_t> answered;
  int copies_of_10 = 0;
  auto answer = [&](const InaPacket& p) {
    if (p.chunk == 10 && copies_of_10++ == 0) return;  // withheld: lost
    ps.Answer(p, Loopback(77, b, 2), port);
    answered.insert(p.chunk);
  };
  for (const InaPacket& p : first) answer(p);
  while (answered.size() < 200) {
    auto next = ps.Next();
    ASSERT_TRUE(next.has_value()) << "no packet from the worker";
    answer(next->first);
  }
  worker.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(copies_of_10, 2);
  EXPECT_EQ(report->fast_retransmissions, 1);
  EXPECT_EQ(report->retransmissions, 1);
  EXPECT_EQ(report->window_cuts, 1);
}

TEST(WorkerContractTest, NoGrantSendsBeyondTheRegion) {
  const int b = 5;
  const uint16_t port = PickUdpPort();
  const JobConfig c = OneWorkerAtS1(b, 0, 32, 0, 0);  // window 0
  ScriptedPs ps(Loopback(77, b, 1), port);
  WorkerOptions o;
  o.worker = "w1";
  o.lanes = 3 * 62;
  o.give_up_ms = 20000;
  o.socket = SocketOptions{Loopback(77, b, 2), port};
  absl::StatusOr<WorkerReport> report = absl::UnknownError("not run");
  std::thread worker([&] { report = RunWorker(c, o); });
  for (int i = 0; i < 3; ++i) {
    auto next = ps.Next();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->first.slot, 32u);  // = aggregator_count: the switch falls back at once
    ps.Answer(next->first, Loopback(77, b, 2), port);
  }
  worker.join();
  ASSERT_TRUE(report.ok()) << report.status();
}

TEST(WorkerContractTest, RefusesANonMember) {
  JobConfig c = OnePsThreeWorkers(6);
  WorkerOptions o;
  o.worker = "w9";
  EXPECT_EQ(RunWorker(c, o).status().code(), absl::StatusCode::kInvalidArgument);
  PsOptions p;
  p.ps = "w1";
  EXPECT_EQ(RunPs(c, p).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::agent
