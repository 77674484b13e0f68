// libinac_client's C ABI (agent/inac_client.h) over loopback against serving PSs: float32 block
// floating point equal to the fixed-point oracle, int32 exact, statistics, and every error a
// caller can make answered with a status and a message.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "agent/inac_client.h"
#include "agent/job_config.h"
#include "agent/ps_serve.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

using testing::DirectTag;
using testing::Loopback;
using testing::PickUdpPort;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = PickUdpPort();
    std::vector<std::string> names = {"w0", "w1", "w2"};
    std::vector<uint32_t> addresses = {Loopback(79, 1, 11), Loopback(79, 1, 12),
                                       Loopback(79, 1, 13)};
    config_.job_id = 9;
    config_.plan_version = 3;
    config_.tags.push_back(DirectTag(50, "ps0", Loopback(79, 1, 1), 1, 0, 1, names, addresses));
    path_ = ::testing::TempDir() + "/client_test_config_" + std::to_string(::getpid()) + ".json";
    std::ofstream(path_) << R"({"job_id": 9, "plan_version": 3, "tags": [{"tag": 50, "ps": "ps0",
        "ps_address": "127.79.1.1", "share": 1, "range": [0, 1], "aggregators": [], "members": [
        {"worker": "w0", "address": "127.79.1.11", "aggregation_node": "ps0"},
        {"worker": "w1", "address": "127.79.1.12", "aggregation_node": "ps0"},
        {"worker": "w2", "address": "127.79.1.13", "aggregation_node": "ps0"}]}]})";
    ps_options_.ps = "ps0";
    ps_options_.unicast_results = true;
    ps_options_.stop = &stop_;
    ps_options_.socket = SocketOptions{Loopback(79, 1, 1), port_, 0, 1};
    ps_ = std::thread([this] { report_ = ServePs(config_, ps_options_); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  void TearDown() override {
    stop_ = true;
    ps_.join();
    ::unlink(path_.c_str());
  }

  inac_options Options(int member) const {
    inac_options o;
    inac_options_init(&o);
    o.config_file = path_.c_str();
    static const char* kBind[] = {"127.79.1.11", "127.79.1.12", "127.79.1.13"};
    o.bind = kBind[member];
    o.port = port_;
    o.timeout_ms = 10000;
    return o;
  }

  // Runs body(member, session) on three threads, one session each.
  template <typename Body>
  void OnEveryMember(Body body) {
    std::vector<std::thread> threads;
    for (int m = 0; m < 3; ++m) {
      threads.emplace_back([&, m] {
        inac_options o = Options(m);
        inac_session* s = nullptr;
        const std::string worker = "w" + std::to_string(m);
        ASSERT_EQ(inac_open(9, worker.c_str(), &o, &s), INAC_OK) << inac_last_error();
        body(m, s);
        inac_close(s);
      });
    }
    for (auto& t : threads) t.join();
  }

  uint16_t port_ = 0;
  JobConfig config_;
  std::string path_;
  std::atomic<bool> stop_{false};
  PsOptions ps_options_;
  absl::StatusOr<ServeReport> report_ = absl::UnknownError("not run");
  std::thread ps_;
};

float Gradient(int m, int64_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + m) * (m + 1) * 0.01);
}

TEST_F(ClientTest, Float32SumsEqualTheFixedPointOracle) {
  constexpr int64_t kN = 5000;
  std::vector<std::vector<float>> got(3);
  std::vector<inac_result> results(3);
  OnEveryMember([&](int m, inac_session* s) {
    std::vector<float> buf(kN);
    for (int64_t i = 0; i < kN; ++i) buf[i] = Gradient(m, i);
    ASSERT_EQ(inac_allreduce_f32(s, buf.data(), kN, &results[m]), INAC_OK) << inac_last_error();
    got[m] = buf;
    inac_stats stats;
    ASSERT_EQ(inac_get_stats(s, &stats), INAC_OK);
    EXPECT_EQ(stats.allreduces, 1);
    EXPECT_EQ(stats.next_chunk, 1 + (kN + 61) / 62);  // the exponent chunk, then the values
  });
  // max |x| < 0.03 < 2^-5: E = -5; 3 members: ceil(log2 3) = 2; s = 30 + 5 - 2 = 33.
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(results[m].scale_bits, 33);
    EXPECT_EQ(results[m].path, INAC_PATH_PS);
    EXPECT_EQ(results[m].saturated, 0);
    EXPECT_EQ(results[m].lanes, kN);
    EXPECT_GT(results[m].packets, 0);
  }
  const float scale = std::ldexp(1.0f, 33), inverse = std::ldexp(1.0f, -33);
  for (int64_t i = 0; i < kN; ++i) {
    int32_t sum = 0;
    for (int m = 0; m < 3; ++m) sum += static_cast<int32_t>(std::nearbyint(Gradient(m, i) * scale));
    const float want = static_cast<float>(sum) * inverse;
    for (int m = 0; m < 3; ++m) ASSERT_EQ(got[m][i], want) << "member " << m << ", value " << i;
  }
}

TEST_F(ClientTest, Int32IsExactAndSaturationIsCounted) {
  OnEveryMember([&](int m, inac_session* s) {
    std::vector<int32_t> ints = {m, -m, 1 << 20, m * 1000};
    inac_result r;
    ASSERT_EQ(inac_allreduce_i32(s, ints.data(), 4, &r), INAC_OK) << inac_last_error();
    EXPECT_EQ(ints, (std::vector<int32_t>{3, -3, 3 << 20, 3000}));
    EXPECT_EQ(r.scale_bits, -1);
    // A NaN is counted (and sums as 0); the largest finite value sets the scale.
    std::vector<float> f = {std::numeric_limits<float>::quiet_NaN(), 1.5f, -0.25f};
    ASSERT_EQ(inac_allreduce_f32(s, f.data(), 3, &r), INAC_OK) << inac_last_error();
    EXPECT_EQ(r.saturated, 1);
    EXPECT_EQ(r.scale_bits, 30 - 1 - 2);
    EXPECT_EQ(f[0], 0.0f);
    EXPECT_EQ(f[1], 4.5f);
    EXPECT_EQ(f[2], -0.75f);
  });
}

TEST_F(ClientTest, BadCallsGetAStatusAndAMessage) {
  inac_session* s = reinterpret_cast<inac_session*>(1);
  inac_options o = Options(0);
  EXPECT_EQ(inac_open(9, "w0", &o, nullptr), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_open(0, "w0", &o, &s), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(inac_open(9, "", &o, &s), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_open(9, "stranger", &o, &s), INAC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(inac_last_error()).find("not a member"), std::string::npos);
  EXPECT_EQ(inac_open(8, "w0", &o, &s), INAC_INVALID_ARGUMENT);  // the file is job 9's
  inac_options missing = o;
  missing.config_file = "/nonexistent/config.json";
  EXPECT_EQ(inac_open(9, "w0", &missing, &s), INAC_NOT_FOUND);
  inac_options bad_bind = o;
  bad_bind.bind = "not-an-address";
  EXPECT_EQ(inac_open(9, "w0", &bad_bind, &s), INAC_INVALID_ARGUMENT);
  inac_options unreachable;
  inac_options_init(&unreachable);
  unreachable.server = "http://127.0.0.1:1";
  EXPECT_EQ(inac_open(9, "w0", &unreachable, &s), INAC_UNAVAILABLE);
  EXPECT_NE(std::string(inac_last_error()).find("no answer"), std::string::npos);
  inac_options netns = o;
  netns.netns = "inac-no-such-namespace";
  EXPECT_EQ(inac_open(9, "w0", &netns, &s), INAC_NOT_FOUND) << inac_last_error();

  ::unsetenv("INAC_SERVER");
  ASSERT_EQ(inac_open(9, "w0", &o, &s), INAC_OK) << inac_last_error();
  EXPECT_STREQ(inac_last_error(), "");
  int32_t v = 1;
  EXPECT_EQ(inac_allreduce_i32(s, nullptr, 1, nullptr), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_allreduce_i32(s, &v, 0, nullptr), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_allreduce_i32(nullptr, &v, 1, nullptr), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_report_data_path(s, "ina", nullptr, 1, 0), INAC_FAILED_PRECONDITION);
  EXPECT_EQ(inac_report_data_path(s, "warp", nullptr, 1, 0), INAC_INVALID_ARGUMENT);
  EXPECT_EQ(inac_get_stats(s, nullptr), INAC_INVALID_ARGUMENT);
  inac_close(s);
  inac_close(nullptr);
  EXPECT_NE(std::string(inac_version()).find("inac_client"), std::string::npos);
}

TEST_F(ClientTest, AMissingMemberTimesOutWithAMessage) {
  inac_options o = Options(0);
  o.timeout_ms = 300;
  inac_session* s = nullptr;
  ASSERT_EQ(inac_open(9, "w0", &o, &s), INAC_OK) << inac_last_error();
  std::vector<float> buf(100, 1.0f);
  inac_result r;
  EXPECT_EQ(inac_allreduce_f32(s, buf.data(), 100, &r), INAC_TIMEOUT);
  EXPECT_NE(std::string(inac_last_error()).find("no result"), std::string::npos);
  inac_stats stats;
  ASSERT_EQ(inac_get_stats(s, &stats), INAC_OK);
  EXPECT_EQ(stats.failures, 1);
  EXPECT_EQ(stats.next_chunk, 1 + 2);  // in step: the exponent chunk and the skipped values
  inac_close(s);
}

}  // namespace
}  // namespace inac::agent
