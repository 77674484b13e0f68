// A watch on a key range of etcd (etcd's v3 Watch service, api/proto/etcd/): the events of
// [key, range_end) in revision order, delivered to a callback on the watch's own thread, the way
// Kubernetes informers and etcd's clientv3 Watcher consume them.
//
// Resumption. The watch remembers the revision up to which it has delivered everything of its
// range. When the stream breaks (the member died, a transport error), it opens a new stream, on
// the client's endpoint in use then (EtcdClient moves to the next endpoint on a transport error),
// from that revision + 1, after a short backoff; no event is lost or delivered twice. When that
// revision was compacted away, etcd cancels the watch: `on_compacted` runs and the watch ends --
// the owner relists (reads the range at a new revision) and starts a new watch from there. The
// same happens when the store's revision is below what the watch delivered (etcd restored from
// an older snapshot: resuming would skip every revision written again since).
//
// The revision. `on_events(events, revision)` says: every change of the range up to `revision`
// has now been delivered. `revision` is the last event's mod revision, or, for a response without
// events (the watch's creation when started "now", a progress notification), the store revision
// of its header: etcd sends those only when the watcher has caught up. RequestProgress asks etcd
// for one at once, so that an owner waiting for "seen up to R" (its own write, at revision R, may
// touch no key of the range) does not wait for the next event. Caveat: etcd before 3.4.25 / 3.5.8
// (Debian 12 ships 3.4.23) can answer RequestProgress with a revision whose events are still
// queued for the watch; such an answer advances `revision` but never the point a broken stream
// resumes from, so no event is lost -- an owner that must have applied a revision's events
// counts them itself (storage/etcd/kv_mirror.h, WaitForApplied).
//
// Thread safety: RequestProgress and Stop may be called from any thread; the callbacks run on the
// watch thread, one at a time; Stop must not be called from a callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "storage/etcd/etcd_client.h"

namespace inac::storage::etcd {

struct EtcdWatchOptions {
  std::string key;
  std::string range_end;       // "": `key` alone; PrefixEnd(prefix): every key with the prefix
  int64_t start_revision = 0;  // the first revision delivered (inclusive); 0: from now on
  std::function<void(const std::vector<mvccpb::Event>& events, int64_t revision)> on_events;
  // The revision to resume from was compacted; the watch has ended (after this, no callback).
  std::function<void(int64_t compact_revision)> on_compacted;
};

class EtcdWatch {
 public:
  // Starts the watch thread. `client` is not owned and must outlive the watch.
  EtcdWatch(EtcdClient* client, EtcdWatchOptions options);
  ~EtcdWatch();  // Stop
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Asks etcd for a progress notification on the open stream (none while reconnecting).
  void RequestProgress();
  // Cancels the stream and joins the thread; no callback runs after it returns.
  void Stop();

  // The revision up to which everything of the range was delivered (0: none yet).
  int64_t revision() const { return revision_.load(); }
  // Whether the watch ended because its revision was compacted.
  bool compacted() const { return compacted_.load(); }

 private:
  using Stream = grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>;
  void Main();
  // One stream, until it breaks or the watch stops; false when the watch has ended (compacted).
  bool RunStream();

  EtcdClient* client_;
  EtcdWatchOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> compacted_{false};
  std::atomic<int64_t> revision_{0};
  int64_t next_revision_ = 0;  // watch thread only: where a new stream starts (0: now)
  absl::Mutex mu_;             // the open stream, for Stop and RequestProgress
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  Stream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace inac::storage::etcd
