// Storage faults under a real `inac serve` (docs/storage.md "Storage faults while running"): the
// database file deleted or replaced while the controller runs. A job submission must then answer
// 503 with the JSON error body (never 201: the job would be gone after a restart), and readiness
// must say 503. No switches: the topology has no p4runtime endpoints (planning only), so readiness
// depends on the storage alone.
#include <stdio.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/json.h"
#include "storage/sqlite_storage.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

class StorageFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(InacBinary(), X_OK) != 0) GTEST_SKIP() << "inac binary not built";
    dir_ = MakeTempDir("storage-fault");
    ASSERT_FALSE(dir_.empty());
    db_ = dir_ + "/inac.db";
    absl::Status s = controller_.Start(dir_, "controller", db_, Json::object());
    ASSERT_TRUE(s.ok()) << s;
    rest_ = std::make_unique<Rest>(controller_.host_port());
    Response r = rest_->Put("/topology", core::TopologyToJson(topology_));
    ASSERT_EQ(r.status, 200) << r.text;
    // Healthy to begin with: a submission is acknowledged and the controller is ready.
    r = rest_->Post("/jobs", Job("before"));
    ASSERT_EQ(r.status, 201) << r.text;
    r = rest_->Get("/readyz");
    ASSERT_EQ(r.status, 200) << r.text << "\n" << Logs();
  }

  void TearDown() override {
    rest_.reset();
    controller_.Terminate();
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::printf("[ info ] logs and databases kept in %s\n", dir_.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  Json Job(const std::string& name) {
    return LongRunningJob(name, {topology_.hosts[0].id, topology_.hosts[3].id},
                          {topology_.hosts[1].id});
  }

  std::string Logs() {
    return controller_.process() ? LogTail(controller_.process()->log_path(), 6000) : "";
  }

  // The submission is refused as a server fault: 503 with {"error": {"code": "unavailable",
  // "message": "<db>: ... <fault> ..."}}, and the controller is not ready.
  void ExpectSubmissionRefusedAndNotReady(const std::string& fault) {
    Response r = rest_->Post("/jobs", Job("after"), {{"Idempotency-Key", "after-1"}});
    EXPECT_EQ(r.status, 503) << r.text;
    ASSERT_TRUE(r.body.is_object()) << r.text;
    ASSERT_TRUE(r.body.contains("error")) << r.text;
    EXPECT_EQ(r.body["error"].value("code", ""), "unavailable") << r.text;
    std::string message = r.body["error"].value("message", "");
    EXPECT_NE(message.find(fault), std::string::npos) << r.text;
    EXPECT_NE(message.find(db_), std::string::npos) << r.text;
    // A retry with the same key is refused the same way (nothing was bound to the key).
    r = rest_->Post("/jobs", Job("after"), {{"Idempotency-Key", "after-1"}});
    EXPECT_EQ(r.status, 503) << r.text;

    // Depends on Controller::Ready() consulting Storage::Health().
    r = rest_->Get("/readyz");
    EXPECT_EQ(r.status, 503) << r.text;
    if (r.body.is_object() && r.body.contains("error")) {
      EXPECT_NE(r.body["error"].value("message", "").find(fault), std::string::npos) << r.text;
    }
    // The process keeps running and answering (a fault is reported, not a crash).
    EXPECT_FALSE(controller_.process()->Exited()) << Logs();
  }

  core::Topology topology_ = LeafSpine(2, 1, 3);
  std::string dir_;
  std::string db_;
  ControllerProcess controller_;
  std::unique_ptr<Rest> rest_;
};

TEST_F(StorageFaultTest, DeletedDatabaseAnswers503AndIsNotReady) {
  // `rm inac.db*`: the file, its write-ahead log and its shared memory.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ignored;
    std::filesystem::remove(db_ + suffix, ignored);
  }
  ASSERT_FALSE(std::filesystem::exists(db_));
  ExpectSubmissionRefusedAndNotReady("deleted");
  EXPECT_FALSE(std::filesystem::exists(db_)) << "the controller recreated the database file";
}

TEST_F(StorageFaultTest, ReplacedDatabaseAnswers503AndIsNotReady) {
  // Another valid INAC database moved over the path (as a careless restore would do).
  const std::string other = dir_ + "/other.db";
  {
    auto storage = storage::SqliteStorage::Open(other);
    ASSERT_TRUE(storage.ok()) << storage.status();
  }
  ASSERT_EQ(rename(other.c_str(), db_.c_str()), 0);
  ExpectSubmissionRefusedAndNotReady("replaced");
  rest_.reset();
  controller_.Terminate();
  // Nothing of the refused submission reached the file now at the path.
  auto storage = storage::SqliteStorage::Open(db_);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto jobs = (*storage)->jobs().List({});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->jobs.empty());
}

}  // namespace
}  // namespace inac::systest
