// Internal to http/ (not part of http/http_server.h's API): the handler threads of
// http/http_server.h's server. The event loop submits complete requests (at most one per
// connection at a time: http/http_connection.h keeps the rest queued); a thread runs the
// HttpHandler, turns what it set into bytes (http/http_response.h; an exception is a 500, a
// content provider a chunked stream) and appends them to the connection's output, and reports to
// the loop through TakeEvents (the loop writes the output and goes on with the connection). A
// stream holds its thread for its life and waits while too much of it is unwritten, so a slow
// reader slows its own stream only. Used by http_server.cc (owner) and http_connection.cc
// (Submit).
//
// Threads: Submit and TakeEvents on the loop thread; the rest on the pool's threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/http_server.h"

namespace inac::http {

struct Connection;
struct ParsedRequest;

class HandlerPool {
 public:
  // `stop`: the server is stopping (streams end at their next write). `wake`: wakes the event
  // loop, called after each event TakeEvents will return. Both must outlive the pool.
  HandlerPool(HttpHandler handler, const std::atomic<bool>& stop, std::function<void()> wake);
  ~HandlerPool();  // Shutdown
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Starts `threads` handler threads (at least one).
  void Start(int threads);
  // Runs what was submitted, then ends and joins the threads. Idempotent.
  void Shutdown();

  // Queues `p`, a complete request of `c`, for the next free thread.
  void Submit(std::shared_ptr<Connection> c, std::unique_ptr<ParsedRequest> p);
  // The (connection id, request finished) events since the last call, oldest first: `finished`
  // false when a handler appended output, true when it returned.
  std::vector<std::pair<uint64_t, bool>> TakeEvents();

 private:
  void WorkerMain();
  void Run(const std::shared_ptr<Connection>& c, ParsedRequest& p);
  void Stream(const std::shared_ptr<Connection>& c, httplib::Response& res);
  bool Emit(const std::shared_ptr<Connection>& c, std::string data);
  void Notify(uint64_t id, bool finished);

  HttpHandler handler_;
  const std::atomic<bool>& stop_;
  std::function<void()> wake_;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::pair<std::shared_ptr<Connection>, std::unique_ptr<ParsedRequest>>> work_;
  bool workers_stop_ = false;
  std::vector<std::thread> workers_;

  // Handler threads -> loop: connections with new output or a finished request.
  std::mutex done_mu_;
  std::vector<std::pair<uint64_t, bool>> done_;
};

}  // namespace inac::http
