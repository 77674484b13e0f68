#include "storage/etcd/kv_mirror.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"

namespace inac::storage::etcd {

KvMirror::KvMirror(EtcdClient* client, KvMirrorOptions options)
    : client_(client), options_(std::move(options)) {
  thread_ = std::thread([this] { Main(); });
}

KvMirror::~KvMirror() { Stop(); }

void KvMirror::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

bool KvMirror::Kept(const std::string& key) const {
  if (options_.include.empty()) return true;
  for (const std::string& prefix : options_.include) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

bool KvMirror::List() {
  std::vector<std::pair<std::string, std::string>> ranges;
  if (options_.include.empty()) {
    ranges.emplace_back(options_.key, options_.range_end);
  } else {
    for (const std::string& prefix : options_.include) {
      ranges.emplace_back(prefix, PrefixEnd(prefix));
    }
  }
  Map state;
  int64_t revision = 0;
  for (const auto& [from, end] : ranges) {
    std::string key = from;
    while (!stop_.load()) {
      etcdserverpb::RangeRequest r;
      r.set_key(key);
      r.set_range_end(end);
      r.set_serializable(true);
      r.set_limit(500);
      r.set_revision(revision);
      auto response = client_->Range(r);
      if (!response.ok()) return false;
      if (revision == 0) revision = response->header().revision();
      for (const auto& kv : response->kvs()) state[kv.key()] = kv;
      if (!response->more() || response->kvs_size() == 0) break;
      key = response->kvs(response->kvs_size() - 1).key() + std::string(1, '\0');
    }
  }
  if (stop_.load() || revision == 0) return false;
  {
    absl::MutexLock l(&mu_);
    state_ = std::move(state);
    ++lists_;
    ++changes_;
    revision_ = revision;
    applied_ = revision;
    cv_.SignalAll();
  }
  if (options_.on_change) options_.on_change();
  return true;
}

void KvMirror::Apply(const std::vector<mvccpb::Event>& events, int64_t revision) {
  bool changed = false;
  {
    absl::MutexLock l(&mu_);
    for (const mvccpb::Event& e : events) {
      if (!Kept(e.kv().key())) continue;
      changed = true;
      if (e.type() == mvccpb::Event::DELETE) {
        state_.erase(e.kv().key());
      } else {
        state_[e.kv().key()] = e.kv();
      }
    }
    if (changed) ++changes_;
    if (!events.empty() && events.back().kv().mod_revision() > applied_.load()) {
      applied_ = events.back().kv().mod_revision();
    }
    if (revision > revision_.load()) revision_ = revision;
    cv_.SignalAll();
  }
  if (changed && options_.on_change) options_.on_change();
}

void KvMirror::Main() {
  while (!stop_.load()) {
    if (!List()) {
      absl::MutexLock l(&mu_);
      if (!stop_.load()) cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
      continue;
    }
    if (options_.on_listed) options_.on_listed(revision_.load());
    EtcdWatchOptions w;
    w.key = options_.key;
    w.range_end = options_.range_end;
    w.start_revision = revision_.load() + 1;
    w.on_events = [this](const std::vector<mvccpb::Event>& events, int64_t revision) {
      Apply(events, revision);
    };
    w.on_compacted = [this](int64_t) {
      absl::MutexLock l(&mu_);
      compacted_ = true;
      cv_.SignalAll();
    };
    auto watch = std::make_unique<EtcdWatch>(client_, std::move(w));
    {
      absl::MutexLock l(&mu_);
      watch_ = watch.get();
      while (!stop_.load() && !compacted_) cv_.Wait(&mu_);
      watch_ = nullptr;
      compacted_ = false;
    }
    watch->Stop();
  }
}

bool KvMirror::Await(const std::atomic<int64_t>& reached, int64_t revision,
                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock l(&mu_);
  while (reached.load() < revision) {
    if (stop_.load()) return false;
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    if (watch_ != nullptr && &reached == &revision_) watch_->RequestProgress();
    cv_.WaitWithDeadline(&mu_, std::min(deadline, now + absl::Milliseconds(100)));
  }
  return true;
}

bool KvMirror::WaitFor(int64_t revision, absl::Duration timeout) {
  return Await(revision_, revision, timeout);
}

bool KvMirror::WaitForApplied(int64_t revision, absl::Duration timeout) {
  return Await(applied_, revision, timeout);
}

void KvMirror::Read(const std::function<void(const Map& state, int64_t revision)>& visit) const {
  absl::MutexLock l(&mu_);
  visit(state_, revision_.load());
}

}  // namespace inac::storage::etcd
