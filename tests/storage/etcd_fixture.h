// The fixture of the storage tests against a real etcd (tests/ha/etcd_cluster.h, Debian's
// /usr/bin/etcd or $INAC_ETCD): one member started for each test, a client on it, and puts and
// deletes of raw keys. Skips when no etcd binary is installed. One test thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"

namespace inac::storage::etcd {

class OneMemberEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (inac::testing::FindEtcdBinary().empty()) GTEST_SKIP() << "no etcd binary";
    absl::Status s = cluster_.Start(1);
    ASSERT_TRUE(s.ok()) << s;
    auto client = EtcdClient::Create({cluster_.endpoint_list(), absl::Seconds(2)});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // Puts `key` (retried for up to 5 s while the member restarts); the revision, 0 on failure.
  int64_t Put(const std::string& key, const std::string& value) {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    for (int attempt = 0; attempt < 50; ++attempt) {
      auto r = client_->Txn(txn);
      if (r.ok()) return r->header().revision();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "put " << key << " never committed";
    return 0;
  }
  // Deletes `key`; the revision, 0 on failure.
  int64_t Delete(const std::string& key) {
    etcdserverpb::TxnRequest txn;
    txn.add_success()->mutable_request_delete_range()->set_key(key);
    auto r = client_->Txn(txn);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->header().revision() : 0;
  }

  inac::testing::EtcdCluster cluster_;
  std::unique_ptr<EtcdClient> client_;
};

}  // namespace inac::storage::etcd
