#include "storage/etcd/etcd_watch.h"

#include <chrono>
#include <utility>

namespace inac::storage::etcd {

EtcdWatch::EtcdWatch(EtcdClient* client, EtcdWatchOptions options)
    : client_(client), options_(std::move(options)) {
  next_revision_ = options_.start_revision;
  if (next_revision_ > 0) revision_ = next_revision_ - 1;
  thread_ = std::thread([this] { Main(); });
}

EtcdWatch::~EtcdWatch() { Stop(); }

void EtcdWatch::Stop() {
  stop_ = true;
  {
    absl::MutexLock l(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void EtcdWatch::RequestProgress() {
  absl::MutexLock l(&mu_);
  if (stream_ == nullptr) return;
  etcdserverpb::WatchRequest request;
  request.mutable_progress_request();
  stream_->Write(request);
}

void EtcdWatch::Main() {
  while (!stop_.load()) {
    if (!RunStream()) return;
    // Back off a little before the next stream (the member may be restarting).
    for (int i = 0; i < 10 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

bool EtcdWatch::RunStream() {
  size_t index = client_->Pick();
  std::shared_ptr<EtcdClient::Stubs> stubs = client_->StubsOf(index);  // outlives the stream
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stubs->watch->Watch(&context);
  {
    absl::MutexLock l(&mu_);
    if (stop_.load()) return false;
    context_ = &context;
  }
  etcdserverpb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(options_.key);
  create->set_range_end(options_.range_end);
  create->set_start_revision(next_revision_);
  create->set_progress_notify(true);
  bool ended = false;
  if (stream->Write(request)) {
    {
      absl::MutexLock l(&mu_);
      stream_ = stream.get();
    }
    etcdserverpb::WatchResponse response;
    std::vector<mvccpb::Event> events;
    while (!stop_.load() && stream->Read(&response)) {
      if (response.compact_revision() > 0) {
        compacted_ = true;
        ended = true;
        if (options_.on_compacted) options_.on_compacted(response.compact_revision());
        break;
      }
      if (response.canceled()) break;  // reopen
      if (response.created() && next_revision_ > 0 &&
          response.header().revision() < next_revision_ - 1) {
        // The store is behind what this watch already delivered: etcd was restored from an
        // older snapshot. Resuming would silently skip the revisions written again since; end
        // as for a compaction so that the owner relists.
        compacted_ = true;
        ended = true;
        if (options_.on_compacted) options_.on_compacted(response.header().revision());
        break;
      }
      int64_t seen = 0;
      bool resume_here = true;
      if (response.events_size() > 0) {
        events.assign(response.events().begin(), response.events().end());
        seen = events.back().kv().mod_revision();
      } else if (!response.created() || next_revision_ == 0) {
        // A progress notification (or the creation of a watch from "now"): caught up to here.
        events.clear();
        seen = response.header().revision();
        // The answer to RequestProgress (watch id -1) of etcd before 3.4.25 and 3.5.8 can run
        // ahead of events still queued for this watch: it may advance revision(), never the
        // point a new stream resumes from.
        resume_here = response.watch_id() != -1;
      }
      if (seen <= 0 || (seen <= revision_.load() && events.empty())) continue;
      if (resume_here) next_revision_ = seen + 1;
      revision_ = seen;
      if (options_.on_events) options_.on_events(events, seen);
    }
  }
  {
    absl::MutexLock l(&mu_);
    stream_ = nullptr;
    context_ = nullptr;
  }
  context.TryCancel();
  grpc::Status status = stream->Finish();
  if (!ended && !stop_.load() && !status.ok()) {
    client_->Failed(index, status, "watch").IgnoreError();  // move to the next endpoint
  }
  return !ended && !stop_.load();
}

}  // namespace inac::storage::etcd
