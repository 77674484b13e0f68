// The PS's accounting, fed hand-made packets as switches would send them: AGGREGATE and
// FALLBACK packets from aggregator addresses with bitmaps over their inputs (a child switch
// expanding to its own inputs), duplicates, a partial overlap, raw chunks and a retransmission
// of a complete chunk. Each packet is sent only after the PS handled the previous one
// (PsOptions::on_packet), so the order is the script's.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "agent/packet.h"
#include "agent/ps.h"
#include "agent/udp_socket.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

using testing::Loopback;
using testing::PickUdpPort;

constexpr int kB = 20;  // 127.77.20.x

class PsAccountingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = PickUdpPort();
    JobConfig::Tag t;
    t.tag = 640;
    t.ps = "ps";
    t.ps_address = Loopback(77, kB, 1);
    t.share = 1;
    t.members = {{"w1", Loopback(77, kB, 2), "s1"},
                 {"w2", Loopback(77, kB, 3), "s1"},
                 {"w3", Loopback(77, kB, 4), "s2"}};
    // s1 sums w1, w2 and s2's aggregate; s2 sums w3.
    t.aggregators = {{"s1", Loopback(77, kB, 10), {"w1", "w2", "s2"}, 0, 64, 0, 64},
                     {"s2", Loopback(77, kB, 11), {"w3"}, 0, 64, 0, 64}};
    config_.job_id = 10;
    config_.tags = {t};
    for (uint32_t host : {2, 10, 11, 12}) {
      auto s = UdpSocket::Open(SocketOptions{Loopback(77, kB, static_cast<int>(host)), port_});
      ASSERT_TRUE(s.ok()) << s.status();
      sockets_[host] = std::move(*s);
    }
    options_.ps = "ps";
    options_.lanes = 3 * kLanes;  // chunks 0, 1, 2
    options_.iterations = 1;
    options_.linger_ms = 200;
    options_.duration_ms = 30000;  // a bound if the test fails
    options_.socket = SocketOptions{Loopback(77, kB, 1), port_};
    options_.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      logged_.push_back(line);
    };
    options_.on_packet = [this](const PsCounters& c) {
      std::lock_guard<std::mutex> lock(mu_);
      handled_ = c.received;
      cv_.notify_all();
    };
    options_.on_ready = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = true;
      cv_.notify_all();
    };
    options_.updates = &feed_;
    Shape();
    ps_ = std::thread([this] { report_ = RunPs(config_, options_); });
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return ready_; }))
        << "the PS did not start";
  }

  // A variant's change to the configuration and options before the PS starts.
  virtual void Shape() {}

  // Sends from 127.77.20.`host` and waits (bounded) until the PS handled it.
  void Send(uint32_t host, uint32_t chunk, uint8_t flags, uint64_t bitmap, uint8_t count,
            int32_t lane_value, uint32_t tag = 640) {
    InaPacket p;
    p.tag = tag;
    p.chunk = chunk;
    p.slot = chunk;
    p.flags = flags;
    p.bitmap = bitmap;
    p.count = count;
    p.lanes.fill(lane_value);
    p.lanes[61] = -lane_value;
    ASSERT_TRUE(sockets_[host]->Send(Loopback(77, kB, 1), port_, EncodePacket(p)).ok());
    ++sent_;
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return handled_ >= sent_; }))
        << "the PS did not handle packet " << sent_;
  }

  // The next result that reached w1's address (multicast mode: the first member's address).
  InaPacket Result() {
    for (int i = 0; i < 1000; ++i) {
      Datagram d;
      if (sockets_[2]->TryReceive(&d)) {
        auto p = DecodePacket(d.payload());
        EXPECT_TRUE(p.ok());
        return p.ok() ? *p : InaPacket{};
      }
      sockets_[2]->Wait(10000);
    }
    ADD_FAILURE() << "no result";
    return InaPacket{};
  }

  // Discards the results that reached w1's address so far.
  void Drain() {
    Datagram d;
    while (sockets_[2]->TryReceive(&d)) {
    }
  }

  void Finish() {
    ps_.join();
    ASSERT_TRUE(report_.ok()) << report_.status();
  }

  void TearDown() override {
    if (ps_.joinable()) ps_.join();
  }

  JobConfig config_;
  ConfigFeed feed_;
  PsOptions options_;
  uint16_t port_ = 0;
  std::map<uint32_t, std::unique_ptr<UdpSocket>> sockets_;
  std::thread ps_;
  absl::StatusOr<PsReport> report_ = absl::UnknownError("not run");
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  int64_t handled_ = 0;
  int64_t sent_ = 0;
  std::vector<std::string> logged_;
};

TEST_F(PsAccountingTest, CountsEveryWorkerOnceAcrossSwitches) {
  // Chunk 0: s1's complete aggregate (w1, w2 and s2 = w3).
  Send(10, 0, kFlagAggregate, 0b111, 3, 30);
  InaPacket r0 = Result();
  EXPECT_EQ(r0.flags, kFlagResult);
  EXPECT_EQ(r0.tag, 640u);
  EXPECT_EQ(r0.chunk, 0u);
  EXPECT_EQ(r0.slot, 0u);
  EXPECT_EQ(r0.count, 3);
  EXPECT_EQ(r0.lanes[0], 30);
  EXPECT_EQ(r0.lanes[61], -30);

  // Chunk 1: a partial sum of w1 + w2 from s1, ...
  Send(10, 1, kFlagFallback, 0b011, 2, 5);
  // ... w1 again alone (duplicate), w1 + w3 (overlaps partly: a violation), ...
  Send(10, 1, kFlagFallback, 0b001, 1, 1000);
  Send(10, 1, kFlagFallback, 0b101, 2, 1000);
  // ... a bit beyond s1's three inputs (violation), a stranger (unknown source) ...
  Send(10, 1, kFlagFallback, 0b1000, 1, 1000);
  Send(12, 1, 0, 0, 1, 1000);
  // ... and w3 from s2, unaggregated: complete, 5 + 7.
  Send(11, 1, kFlagFallback, 0b1, 1, 7);
  InaPacket r1 = Result();
  EXPECT_EQ(r1.chunk, 1u);
  EXPECT_EQ(r1.lanes[0], 12);
  EXPECT_EQ(r1.lanes[61], -12);

  // A retransmission of complete chunk 0 from w1: a duplicate, answered with the result again.
  Send(2, 0, kFlagRetransmit, 0, 1, 1000);
  InaPacket again = Result();
  EXPECT_EQ(again.chunk, 0u);
  EXPECT_EQ(again.lanes[0], 30);

  // Chunk 2: w1 raw, then w2 + w3 (s2's input) from s1, with a wrong count (accepted, counted).
  Send(2, 2, 0, 0, 1, 100);
  Send(10, 2, kFlagFallback, 0b110, 5, 11);
  InaPacket r2 = Result();
  EXPECT_EQ(r2.chunk, 2u);
  EXPECT_EQ(r2.lanes[0], 111);
  Finish();

  const PsCounters& c = report_->counters;
  EXPECT_TRUE(report_->complete);
  EXPECT_EQ(report_->iterations_done, 1);
  EXPECT_EQ(c.received, 10);
  EXPECT_EQ(c.raw, 2);
  EXPECT_EQ(c.aggregate, 1);
  EXPECT_EQ(c.fallback, 6);
  EXPECT_EQ(c.unknown_source, 1);
  EXPECT_EQ(c.duplicate, 2);
  EXPECT_EQ(c.violation, 2);
  EXPECT_EQ(c.retransmit, 1);
  EXPECT_EQ(c.count_mismatch, 1);
  EXPECT_EQ(c.results_sent, 3);
  EXPECT_EQ(c.results_resent, 1);
  // 9 contributions; alone: w3 of chunk 1 and w1 of chunk 2; the other 7 in multi-worker packets.
  EXPECT_EQ(c.contributions, 9);
  EXPECT_EQ(c.in_network, 7);
  ASSERT_EQ(report_->iterations.size(), 1u);
  EXPECT_EQ(report_->iterations[0].contributions, 9);
  EXPECT_EQ(report_->iterations[0].in_network, 7);
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(logged_.size(), 2u);
  EXPECT_NE(logged_[0].find("overlaps"), std::string::npos) << logged_[0];
  EXPECT_NE(logged_[1].find("beyond"), std::string::npos) << logged_[1];
}

TEST_F(PsAccountingTest, IgnoresForeignTagsChunksAndResults) {
  InaPacket p;
  p.tag = 641;  // not this PS's
  ASSERT_TRUE(sockets_[2]->Send(Loopback(77, kB, 1), port_, EncodePacket(p)).ok());
  p.tag = 640;
  p.chunk = 3;  // beyond 1 iteration x 3 chunks
  ASSERT_TRUE(sockets_[2]->Send(Loopback(77, kB, 1), port_, EncodePacket(p)).ok());
  p.chunk = 0;
  p.flags = kFlagResult;
  ASSERT_TRUE(sockets_[2]->Send(Loopback(77, kB, 1), port_, EncodePacket(p)).ok());
  const uint8_t junk[10] = {};
  ASSERT_TRUE(sockets_[2]->Send(Loopback(77, kB, 1), port_, junk).ok());
  sent_ = 4;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return handled_ >= 4; }));
  }
  for (uint32_t chunk = 0; chunk < 3; ++chunk) Send(10, chunk, kFlagAggregate, 0b111, 3, 1);
  Finish();
  const PsCounters& c = report_->counters;
  EXPECT_EQ(c.unknown_tag, 1);
  EXPECT_EQ(c.out_of_range, 1);
  EXPECT_EQ(c.ignored, 1);
  EXPECT_EQ(c.malformed, 1);
  EXPECT_EQ(c.contributions, 9);
  EXPECT_EQ(c.in_network, 9);
  EXPECT_TRUE(report_->complete);
}

// A re-plan during the run: s1 now sums w3 and w1 (bits 0 and 1) under the job's next tag value,
// w2 goes to the PS alone, s2 is gone. Each packet is read with the inputs of its own tag value.
TEST_F(PsAccountingTest, ReplanReadsEachPacketWithTheInputsOfItsTag) {
  constexpr uint32_t kNewTag = 640 + (1u << 30);  // generation 1 (core::AggregationTag)
  // Chunk 0 under the old plan: w1 + w2 from s1.
  Send(10, 0, kFlagFallback, 0b011, 2, 3);
  JobConfig next = config_;
  next.plan_version = 2;
  JobConfig::Tag& t = next.tags[0];
  t.tag = kNewTag;
  t.members = {{"w3", Loopback(77, kB, 4), "s1"},  // another member order: matched by id
               {"w1", Loopback(77, kB, 2), "s1"},
               {"w2", Loopback(77, kB, 3), "ps"}};
  t.aggregators = {{"s1", Loopback(77, kB, 10), {"w3", "w1"}, 0, 64, 0, 64}};
  feed_.Publish(next);
  // Chunk 0: bit 0 of s1 under the new tag is w3 (under the old one it was w1): complete.
  Send(10, 0, kFlagFallback, 0b01, 1, 4, kNewTag);
  InaPacket r0 = Result();
  EXPECT_EQ(r0.chunk, 0u);
  EXPECT_EQ(r0.tag, kNewTag);  // results carry the latest value
  EXPECT_EQ(r0.lanes[0], 7);
  // Chunk 1: w1 + w2 under the old tag, then the new plan's w3 + w1 (overlaps w1 across the
  // re-plan: dropped, not a violation), then w3 alone under the new tag.
  Send(10, 1, kFlagFallback, 0b011, 2, 10);
  Send(10, 1, kFlagAggregate, 0b11, 2, 1000, kNewTag);
  Send(10, 1, kFlagFallback | kFlagRetransmit, 0b01, 1, 5, kNewTag);
  InaPacket r1 = Result();
  EXPECT_EQ(r1.chunk, 1u);
  EXPECT_EQ(r1.lanes[0], 15);
  // Chunk 2, late packets of the old plan: s2's w3, then s1's w1 + w2 (its old bits 0 and 1).
  Send(11, 2, kFlagFallback, 0b1, 1, 1);
  Send(10, 2, kFlagFallback, 0b011, 2, 2);
  InaPacket r2 = Result();
  EXPECT_EQ(r2.chunk, 2u);
  EXPECT_EQ(r2.lanes[0], 3);
  EXPECT_EQ(r2.tag, kNewTag);
  Finish();
  const PsCounters& c = report_->counters;
  EXPECT_TRUE(report_->complete);
  EXPECT_EQ(c.violation, 0);
  EXPECT_EQ(c.replan_overlap, 1);
  EXPECT_EQ(c.contributions, 9);
  EXPECT_EQ(report_->plans, (std::vector<int64_t>{0, 2}));
}

// A re-plan that cuts the shard into other ranges (grid-split) in the middle of the run: every
// packet is read with the lanes and inputs of its own tag value, the sums are kept per gradient
// chunk, and every result goes out under the new plan's tag and chunk number.
TEST_F(PsAccountingTest, ReplanThatRecutsTheShardKeepsEverySumPerGradientChunk) {
  constexpr uint32_t kGen = 1u << 30;
  // Chunk 0 under the old plan: w1 + w2 from s1.
  Send(10, 0, kFlagFallback, 0b011, 2, 2);
  JobConfig next = config_;
  next.plan_version = 3;
  next.tags[0].tag = 641 + kGen;  // [0, 0.5): gradient chunks 0 and 1
  next.tags[0].end = 0.5;
  next.tags.push_back(config_.tags[0]);
  next.tags[1].tag = 642 + kGen;  // [0.5, 1): gradient chunk 2, its chunk 0 on the wire
  next.tags[1].begin = 0.5;
  feed_.Publish(next);
  // Chunk 0: w3 from s2 under the old tag (a late packet of the old plan) completes it; the
  // result goes out under the new tag.
  Send(11, 0, kFlagFallback, 0b1, 1, 4);
  InaPacket r0 = Result();
  EXPECT_EQ(r0.tag, 641 + kGen);
  EXPECT_EQ(r0.chunk, 0u);
  EXPECT_EQ(r0.lanes[0], 6);
  EXPECT_EQ(r0.lanes[61], -6);
  // Gradient chunk 1 under the new tag: s1's complete aggregate.
  Send(10, 1, kFlagAggregate, 0b111, 3, 9, 641 + kGen);
  InaPacket r1 = Result();
  EXPECT_EQ(r1.tag, 641 + kGen);
  EXPECT_EQ(r1.chunk, 1u);
  EXPECT_EQ(r1.lanes[0], 9);
  // Gradient chunk 2: w1 raw under the new tag (its chunk 0), w2 + s2's w3 from s1 under the
  // old one (chunk 2).
  Send(2, 0, 0, 0, 1, 1, 642 + kGen);
  Send(10, 2, kFlagFallback, 0b110, 2, 5);
  InaPacket r2 = Result();
  EXPECT_EQ(r2.tag, 642 + kGen);
  EXPECT_EQ(r2.chunk, 0u);
  EXPECT_EQ(r2.lanes[0], 6);
  // w1 asks for chunk 0 again under the old tag: the kept result, under the new tag.
  Send(2, 0, kFlagRetransmit, 0, 1, 1);
  InaPacket again = Result();
  EXPECT_EQ(again.tag, 641 + kGen);
  EXPECT_EQ(again.chunk, 0u);
  EXPECT_EQ(again.lanes[0], 6);
  Finish();
  const PsCounters& c = report_->counters;
  EXPECT_TRUE(report_->complete);
  EXPECT_EQ(report_->iterations_done, 1);
  EXPECT_EQ(c.violation, 0);
  EXPECT_EQ(c.contributions, 9);
  EXPECT_EQ(c.results_sent, 3);
  EXPECT_EQ(c.results_resent, 1);
  EXPECT_EQ(report_->plans, (std::vector<int64_t>{0, 3}));
}

// A re-plan that gives the chunks other members cannot continue: the run fails and says why.
TEST_F(PsAccountingTest, ReplanWithOtherMembersFails) {
  JobConfig next = config_;
  next.plan_version = 3;
  next.tags[0].tag = 641;
  next.tags[0].members[2].worker = "w9";
  next.tags[0].aggregators[1].inputs = {"w9"};
  feed_.Publish(next);  // taken within the PS's next 50 ms wait
  ps_.join();
  ASSERT_FALSE(report_.ok());
  EXPECT_EQ(report_.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(report_.status().message().find("other members; restart the agents"), std::string::npos)
      << report_.status();
}

// The same job cut into two tags of 300 chunks each (chunks per tag well beyond the PS's 256 kept
// results).
class PsTwoTagsTest : public PsAccountingTest {
 protected:
  static constexpr uint32_t kChunksPerTag = 300;
  void Shape() override {
    config_.tags.push_back(config_.tags[0]);
    config_.tags[0].end = 0.5;
    config_.tags[1].tag = 641;
    config_.tags[1].begin = 0.5;
    options_.lanes = 2 * kChunksPerTag * kLanes;
  }
};

// A tag that runs ahead must not push the results of a slower tag out of the PS's memory: a worker
// of the slow tag that lost a result can still get it again, however far the other tag went.
TEST_F(PsTwoTagsTest, ATagRunningAheadDoesNotEvictTheResultsOfAnother) {
  Send(10, 0, kFlagAggregate, 0b111, 3, 7, 640);  // tag 640's chunk 0 completes
  for (uint32_t k = 0; k < kChunksPerTag; ++k) {
    Send(10, k, kFlagAggregate, 0b111, 3, 1, 641);
    if (k % 32 == 0) Drain();
  }
  Drain();
  // w1 never got tag 640's chunk 0: its retransmission gets the kept result.
  Send(2, 0, kFlagRetransmit, 0, 1, 1, 640);
  InaPacket again = Result();
  for (int late = 0; again.tag == 641 && late < 64; ++late) again = Result();  // 641's last ones
  EXPECT_EQ(again.tag, 640u);
  EXPECT_EQ(again.chunk, 0u);
  EXPECT_EQ(again.lanes[0], 7);
  // Tag 640's other chunks complete, so that the run ends.
  for (uint32_t k = 1; k < kChunksPerTag; ++k) Send(10, k, kFlagAggregate, 0b111, 3, 1, 640);
  Finish();
  EXPECT_TRUE(report_->complete);
  EXPECT_EQ(report_->counters.results_forgotten, 0);
  EXPECT_EQ(report_->counters.results_resent, 1);
}

}  // namespace
}  // namespace inac::agent
