// The controller's event log seen from inside the process: appends events to the durable log
// (core::EventLog) and lets readers wait for new ones (GET /events/stream) without polling the
// database in a tight loop. Every component that commits a transaction carrying events calls
// Notify() after the commit so that waiting readers wake at once.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/job.h"
#include "core/stores.h"

namespace inac::server {

// Unix epoch milliseconds. Injected so tests control time (as Envoy's TimeSource).
using Clock = std::function<int64_t()>;
int64_t SystemClockMs();

// An event of `kind` at `now` (epoch ms), about `job` when it has one.
core::Event MakeEvent(int64_t now, std::string kind, std::optional<core::JobId> job,
                      std::string message, std::string data = "{}");

class EventHub {
 public:
  // `events` is not owned and must outlive the hub.
  EventHub(core::EventLog* events, Clock clock) : events_(events), clock_(std::move(clock)) {}

  // Appends one event in its own transaction (a failure is logged, never fatal) and notifies.
  void Log(const std::string& kind, std::optional<core::JobId> job, const std::string& message);
  // Wakes every WaitForEvents: a transaction carrying events committed.
  void Notify();
  // Marks the hub closed (the controller stopped): waiters return at once.
  void Close();
  void Open();

  // Blocks until an event with seq > after_seq exists, `timeout_ms` passes or the hub is closed;
  // returns the newest sequence number (after_seq when the log cannot be read).
  int64_t WaitForEvents(int64_t after_seq, int timeout_ms);

 private:
  core::EventLog* events_;
  Clock clock_;
  absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every Notify
  bool closed_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace inac::server
