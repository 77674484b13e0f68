// Test harness: a real etcd cluster (Debian's /usr/bin/etcd, or $INAC_ETCD) of 1..n members on
// 127.0.0.1, random free ports, data in a temporary directory, for the EtcdStorage contract tests
// and the HA system tests (tests/ha/). Each member is a child process with its output in
// <dir>/<name>.log, SIGKILLed when the harness is destroyed (also when a test fails) or when the
// thread that started it exits (PR_SET_PDEATHSIG).
//
// Thread safety: one test thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace inac::testing {

// The etcd binary to use ("" when none is installed: the caller skips with a message).
std::string FindEtcdBinary();
// etcdctl beside it, or on the usual paths ("" when none).
std::string FindEtcdctlBinary();

class EtcdCluster {
 public:
  EtcdCluster() = default;
  ~EtcdCluster();  // SIGKILLs every member and removes the directory.
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts `members` members and waits (at most `timeout`) until the cluster commits a write.
  absl::Status Start(int members, absl::Duration timeout = absl::Seconds(20));
  // SIGKILLs member `i` (reaped).
  void Kill(int i);
  // Restarts member `i` on its ports with its data directory (after Kill).
  absl::Status Restart(int i);
  // Waits until a write commits (a quorum is there). DeadlineExceeded after `timeout`.
  absl::Status AwaitWritable(absl::Duration timeout);
  // The index of the member that is etcd's Raft leader now (`etcdctl endpoint status`); -1 when
  // unknown (no etcdctl, no leader).
  int LeaderIndex() const;
  // `etcdctl snapshot save` of member `i` into `path`. FailedPrecondition without etcdctl.
  absl::Status SaveSnapshot(int i, const std::string& path);
  // Disaster recovery as etcd documents it: every member is killed, its data directory replaced
  // by `etcdctl snapshot restore` of `path` (same names, ports and cluster), and started again;
  // waits until the restored cluster commits. Its keys, leases and revision are the snapshot's.
  absl::Status RestoreSnapshot(const std::string& path, absl::Duration timeout = absl::Seconds(30));

  // "http://127.0.0.1:C0,http://127.0.0.1:C1,..." and one by one.
  std::string endpoints() const;
  std::vector<std::string> endpoint_list() const;
  const std::string& dir() const { return dir_; }
  // The tail of every member's log (failure messages).
  std::string Logs() const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  absl::Status Spawn(int i, bool existing);

  std::string binary_;
  std::string dir_;
  std::vector<Member> members_;
};

}  // namespace inac::testing
