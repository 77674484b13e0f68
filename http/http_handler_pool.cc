#include "http/http_handler_pool.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "http/http_connection.h"
#include "http/http_response.h"
#include "spdlog/spdlog.h"

namespace inac::http {
namespace {

// A streaming response waits while this much of it is not yet written to the client.
constexpr size_t kMaxPendingOutput = 1 << 20;

// The loop closes the connection once this answer is written (read in
// ConnectionDriver::OnHandlerEvent).
void MarkClose(Connection& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  c.close_requested = true;
}

}  // namespace

HandlerPool::HandlerPool(HttpHandler handler, const std::atomic<bool>& stop,
                         std::function<void()> wake)
    : handler_(std::move(handler)), stop_(stop), wake_(std::move(wake)) {}

HandlerPool::~HandlerPool() { Shutdown(); }

void HandlerPool::Start(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    workers_.emplace_back([this] { WorkerMain(); });
  }
}

void HandlerPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void HandlerPool::Submit(std::shared_ptr<Connection> c, std::unique_ptr<ParsedRequest> p) {
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_.emplace_back(std::move(c), std::move(p));
  }
  work_cv_.notify_one();
}

std::vector<std::pair<uint64_t, bool>> HandlerPool::TakeEvents() {
  std::vector<std::pair<uint64_t, bool>> batch;
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    batch.swap(done_);
  }
  return batch;
}

void HandlerPool::Notify(uint64_t id, bool finished) {
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_.emplace_back(id, finished);
  }
  wake_();
}

void HandlerPool::WorkerMain() {
  while (true) {
    std::shared_ptr<Connection> c;
    std::unique_ptr<ParsedRequest> p;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      work_cv_.wait(lock, [this] { return workers_stop_ || !work_.empty(); });
      if (work_.empty()) return;
      c = std::move(work_.front().first);
      p = std::move(work_.front().second);
      work_.pop_front();
    }
    Run(c, *p);
    Notify(c->id, true);
  }
}

// Appends `data` to the connection's output for the loop to write; false when the connection
// is gone. Waits while too much is pending (a slow reader slows its stream, nothing else).
bool HandlerPool::Emit(const std::shared_ptr<Connection>& c, std::string data) {
  {
    std::unique_lock<std::mutex> lock(c->mu);
    c->drained.wait(lock, [&] { return c->dead || c->out.size() < kMaxPendingOutput || stop_; });
    if (c->dead || stop_) return false;
    c->out += data;
  }
  Notify(c->id, false);
  return true;
}

void HandlerPool::Run(const std::shared_ptr<Connection>& c, ParsedRequest& p) {
  httplib::Response res;
  res.version = "HTTP/1.1";
  try {
    handler_(p.req, res);
  } catch (const std::exception& e) {
    spdlog::error("event=http_exception error=\"{}\"", e.what());
    res = httplib::Response();
    res.status = 500;
    res.set_content(R"({"error":{"code":"internal","message":"internal error","field":""}})",
                    "application/json");
  }
  if (res.status == -1) res.status = 200;  // as cpp-httplib: a handler that set no status
  if (res.status < 100) res.status = 500;
  bool keep_alive = p.keep_alive;
  if (absl::EqualsIgnoreCase(res.get_header_value("Connection"), "close")) keep_alive = false;
  if (!res.content_provider_) {
    std::string out = SerializeResponse(res, keep_alive);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->dead) c->out += out;
    }
    if (!keep_alive) MarkClose(*c);
    return;
  }
  if (!keep_alive) MarkClose(*c);
  if (!Emit(c, StreamHead(res, keep_alive))) return;
  Stream(c, res);
}

// Runs the content provider of `res` (its head is sent), each write a chunk, until it ends, fails
// or the connection or the server goes.
void HandlerPool::Stream(const std::shared_ptr<Connection>& c, httplib::Response& res) {
  bool ended = false;
  bool failed = false;
  httplib::DataSink sink;
  sink.write = [&](const char* data, size_t n) {
    if (n == 0) return true;
    if (!Emit(c, Chunk(std::string_view(data, n)))) {
      failed = true;
      return false;
    }
    return true;
  };
  sink.done = [&] { ended = true; };
  sink.is_writable = [&] {
    std::lock_guard<std::mutex> lock(c->mu);
    return !c->dead && !stop_;
  };
  size_t offset = 0;
  auto write = sink.write;
  sink.write = [&](const char* data, size_t n) {
    offset += n;
    return write(data, n);
  };
  while (!ended && !failed && !stop_) {
    if (!res.content_provider_(offset, 0, sink)) break;
  }
  res.content_provider_success_ = ended && !failed;
  if (ended && !failed) {
    Emit(c, std::string(kLastChunk));
  } else {
    MarkClose(*c);  // a stream cut short cannot be framed: the connection ends with it
  }
}

}  // namespace inac::http
