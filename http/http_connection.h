// Internal to http/ (not part of http/http_server.h's API): one connection of http/http_server.h's
// server, its state and its state machine. A Connection is the state; the ConnectionDriver moves
// it on the event loop's thread: the TLS handshake, reads fed to the request reader
// (http/http1_reader.h), admission of each head (HttpHeadCheck), the queue of pipelined requests
// handed one at a time to the handler pool (http/http_handler_pool.h), writes of the output
// buffer, refusals answered in order, the lingering close, and the close itself. Reads and writes
// go through Receive and Send, on the socket or the connection's TLS session alike, so everything
// above them is the same code for HTTP and HTTPS.
//
// The server (http/http_server.cc) accepts connections, applies the connection caps and the
// timeouts and owns the table of open connections; the driver tells it when one closes. Used by
// http_server.cc and http_handler_pool.cc only.
//
// Threads: everything here runs on the loop thread, but the members under "shared with the
// handler threads", which are guarded by Connection::mu (the handler pool appends to `out`, waits
// on `drained` while too much of a stream is unwritten, and asks for a close).
#pragma once

#include <openssl/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/http1_reader.h"
#include "http/http_server.h"

namespace inac::http {

class HandlerPool;

// The loop's clock: steady milliseconds.
int64_t NowMs();

// A request for the handler pool: cpp-httplib's request, and whether the connection stays open
// after its answer.
struct ParsedRequest {
  httplib::Request req;
  bool keep_alive = true;
};

// A refusal the server answers before closing: the status and the error body's code and message.
struct ParseError {
  int status;
  const char* code;
  std::string message;
};

// The server's counters (HttpServerStats), read by HttpServer::stats from any thread.
struct HttpCounters {
  std::atomic<int64_t> accepted{0}, refused{0}, timed_out{0}, requests{0}, open{0}, tls_failures{0};
};

struct Connection {
  int fd = -1;
  uint64_t id = 0;
  std::string remote_addr;
  int remote_port = 0;
  std::string local_addr;
  int local_port = 0;

  // Loop-thread state.
  Http1Reader reader;  // the HTTP/1.1 framing of `in`
  std::string in;
  std::unique_ptr<ParsedRequest> current;  // the request whose body is being read
  int64_t request_started_ms = 0;          // first byte of the request being read (0: none)
  int64_t last_activity_ms = 0;
  std::deque<std::unique_ptr<ParsedRequest>> queue;  // complete, waiting for a handler
  bool busy = false;                                 // one of its requests is with a handler
  bool read_stopped = false;     // no more requests are read (close, error, EOF)
  bool close_after = false;      // close once answered and written
  std::string pending_error;     // answered once the earlier requests are
  uint32_t registered = 0;       // epoll events
  bool detached = false;         // removed from epoll: the peer is gone, a handler still runs
  int64_t write_blocked_ms = 0;  // since when `out` could not be written fully
  bool closed = false;           // ConnectionDriver::Close ran: the server has forgotten it

  // TLS (loop thread only): the session, or null for plain HTTP.
  SSL* ssl = nullptr;
  bool handshaking = false;
  int64_t accepted_ms = 0;
  bool tls_done = false;          // fatal error or close_notify sent: no more SSL calls
  bool read_wants_write = false;  // SSL_read needs the socket writable
  bool write_wants_read = false;  // SSL_write needs the socket readable

  // Shared with the handler threads.
  std::mutex mu;
  std::condition_variable drained;  // `out` shrank or the connection died
  std::string out;
  bool dead = false;
  bool close_requested = false;  // the handler's answer closes the connection
  // Refused before its body was read: after the answer, stop sending and read (and discard) what
  // the client still sends for a while before closing, so that closing with unread data does not
  // reset the connection before the client has read the answer ("lingering close").
  bool linger = false;
  bool lingering = false;
  int64_t linger_until_ms = 0;
  size_t lingered_bytes = 0;
};

// The state machine of every connection of one server. Loop thread only.
class ConnectionDriver {
 public:
  // `forget` is called when a connection closes, after its socket is: the server drops it from
  // its tables. Everything passed must outlive the driver.
  ConnectionDriver(const HttpServerOptions& options, const HttpHeadCheck& head_check, int epoll_fd,
                   HandlerPool& pool, HttpCounters& counters,
                   std::function<void(const Connection&)> forget);

  // Sets the connection's epoll interest to `events` (no-op when unchanged or detached).
  void Register(Connection& c, uint32_t events);
  // The interest its state calls for: reading unless stopped or the pipeline is full, writing
  // when `want_write` or TLS needs it.
  void UpdateInterest(Connection& c, bool want_write);

  // The epoll events `events` arrived for `c`.
  void OnEvent(const std::shared_ptr<Connection>& c, uint32_t events);
  // The handler pool wrote output for `c` (`finished` false) or finished its request (true).
  void OnHandlerEvent(const std::shared_ptr<Connection>& c, bool finished);

  // Writes what it can of the output; closes the connection once all is written and it should
  // close.
  void Flush(const std::shared_ptr<Connection>& c);
  // Stops reading `c` and answers `e` once the requests before it are answered.
  void Fail(const std::shared_ptr<Connection>& c, const ParseError& e);
  // Closes the socket (close_notify first over TLS), wakes a handler waiting on it, and tells the
  // server.
  void Close(const std::shared_ptr<Connection>& c);

 private:
  enum class Io { kDone, kWouldBlock, kClosed };  // the outcome of one read or write

  // Transport: the socket, or the TLS session over it.
  Io Receive(Connection& c, char* buf, size_t n, size_t* got);
  Io Send(Connection& c, const char* data, size_t n, size_t* sent);
  void TlsShutdown(Connection& c);
  void Handshake(const std::shared_ptr<Connection>& c);
  void AnswerPlainHttp(const std::shared_ptr<Connection>& c);

  // Requests.
  void OnReadable(const std::shared_ptr<Connection>& c);
  void Parse(const std::shared_ptr<Connection>& c);
  bool Admit(const std::shared_ptr<Connection>& c, const Http1Request& head);
  void Complete(const std::shared_ptr<Connection>& c);
  void Dispatch(const std::shared_ptr<Connection>& c);

  // Output and the end of a connection.
  bool WriteOut(Connection& c);
  void StartLinger(const std::shared_ptr<Connection>& c);
  void Drain(const std::shared_ptr<Connection>& c);
  void OnHangUp(const std::shared_ptr<Connection>& c);

  const HttpServerOptions& options_;
  const HttpHeadCheck& head_check_;
  const int epoll_fd_;
  HandlerPool& pool_;
  HttpCounters& counters_;
  std::function<void(const Connection&)> forget_;
};

}  // namespace inac::http
