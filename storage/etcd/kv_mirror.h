// A watch-fed copy of a key range of etcd, kept current in memory (an informer, as Kubernetes'
// client-go has): lists the range at one revision, then applies the events of an EtcdWatch
// (storage/etcd/etcd_watch.h) from that revision + 1. EtcdStorage (storage/etcd/etcd_storage.h)
// serves the control loop's snapshot from it instead of re-reading every job each pass.
//
// State. key -> mvccpb::KeyValue of every kept key of [key, range_end) as of `revision()`: the
// revision up to which every change of the range has been applied (0 until the first list
// succeeded). A reader sees one revision: Read runs its visitor under the mirror's lock, between
// two batches of events. `include`, when not empty, keeps only the keys with one of these
// prefixes (the list reads only those sub-ranges; the watch still covers the whole range, so that
// its revision advances with every change of it).
//
// Lifecycle. The constructor starts a thread that lists (retrying every 200 ms until a list
// succeeds), then watches. When the watch's revision was compacted (EtcdWatch's on_compacted),
// the thread relists at a new revision, replaces the whole state and starts a new watch from
// there: a key deleted meanwhile disappears, nothing is applied twice. Stop (the destructor)
// ends the watch and joins the thread; it may wait for a Range in flight (the client's rpc
// timeout, 3 s by default).
//
// Waiting. WaitFor(R) returns once revision() >= R. A revision R of a change outside the range
// (or of a key that `include` drops) is reached through a progress notification
// (EtcdWatch::RequestProgress, asked again every 100 ms while waiting). Caveat: etcd before 3.4.25
// and 3.5.8 (Debian's is 3.4.23) answers a progress request with its store revision even while
// the watch still has events to deliver, so revision() may run ahead of the state for a moment.
// The state itself is always the range as of some revision (events arrive in order).
// WaitForApplied(R) does not trust progress notifications: it returns once the mirror applied a
// list at a revision >= R or an event of the range (kept or not) with mod revision >= R -- the
// way to wait for a write known to touch the range (read-your-writes). Prefer it: on those etcd
// versions a progress notification may run ahead of queued events, so a production path should
// not rely on it (EtcdWatch never resumes past an event it did not deliver, etcd_watch.h).
//
// Change notification. changes() counts the applied batches that changed a kept key (and the
// lists); `on_change` (optional) runs on the mirror thread after each of them, outside the lock.
//
// Thread safety: every method may be called from any thread, except that Stop and the destructor
// must not be called from `on_change` or from a Read visitor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserverpb/rpc.pb.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_watch.h"

namespace inac::storage::etcd {

struct KvMirrorOptions {
  std::string key;
  std::string range_end;             // PrefixEnd(prefix) for every key with a prefix
  std::vector<std::string> include;  // empty: every key of the range
  std::function<void()> on_change;
  // Runs on the mirror thread after each list, before its watch starts, with the list's revision
  // (tests use it to compact that revision away and so exercise the relist).
  std::function<void(int64_t revision)> on_listed;
};

class KvMirror {
 public:
  using Map = std::map<std::string, mvccpb::KeyValue>;

  // Starts the mirror thread. `client` is not owned and must outlive the mirror.
  KvMirror(EtcdClient* client, KvMirrorOptions options);
  ~KvMirror();  // Stop
  KvMirror(const KvMirror&) = delete;
  KvMirror& operator=(const KvMirror&) = delete;

  // Ends the watch and joins the thread; idempotent. Read keeps serving the last state.
  void Stop();

  // Whether revision() >= `revision` within `timeout`; false on timeout or after Stop.
  bool WaitFor(int64_t revision, absl::Duration timeout);

  // Whether applied_revision() >= `revision` within `timeout` (see "Waiting" above).
  bool WaitForApplied(int64_t revision, absl::Duration timeout);

  // Runs `visit(state, revision)` under the lock, on a state current up to `revision` (0 and an
  // empty state before the first list). `visit` must not call into the mirror.
  void Read(const std::function<void(const Map& state, int64_t revision)>& visit) const;

  int64_t revision() const { return revision_.load(); }
  // The revision of the last list or the newest event applied (0 before the first list).
  int64_t applied_revision() const { return applied_.load(); }
  uint64_t changes() const { return changes_.load(); }
  // How many times the range was listed (1 after the first list; more after compactions).
  int64_t lists() const { return lists_.load(); }

 private:
  void Main();
  // Lists the kept keys at one revision and replaces the state; false on an error.
  bool List();
  void Apply(const std::vector<mvccpb::Event>& events, int64_t revision);
  // Waits until `reached` (revision_ or applied_) >= `revision`; asks for progress for revision_.
  bool Await(const std::atomic<int64_t>& reached, int64_t revision, absl::Duration timeout);
  bool Kept(const std::string& key) const;

  EtcdClient* client_;
  KvMirrorOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled on every revision change, compaction and Stop
  Map state_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> revision_{0};  // written under mu_
  std::atomic<int64_t> applied_{0};   // written under mu_
  std::atomic<uint64_t> changes_{0};
  std::atomic<int64_t> lists_{0};
  std::atomic<bool> stop_{false};                    // written under mu_
  bool compacted_ ABSL_GUARDED_BY(mu_) = false;      // the watch ended: relist
  EtcdWatch* watch_ ABSL_GUARDED_BY(mu_) = nullptr;  // for RequestProgress
  std::thread thread_;
};

}  // namespace inac::storage::etcd
