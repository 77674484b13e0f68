#include "http/http_connection.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <utility>

#include "http/http_handler_pool.h"
#include "http/http_response.h"
#include "http/tls_context.h"
#include "spdlog/spdlog.h"

namespace inac::http {
namespace {

// A refused client is read (and ignored) this long, or this much, before its connection closes.
constexpr int64_t kLingerMs = 2000;
constexpr size_t kMaxLingerBytes = 4 << 20;

// The handlers' request for a head the reader read (its body comes with Complete).
std::unique_ptr<ParsedRequest> HandlerRequest(const Connection& c, const Http1Request& head) {
  auto p = std::make_unique<ParsedRequest>();
  httplib::Request& req = p->req;
  req.method = head.method;
  req.version = head.version;
  req.target = head.target;
  const size_t q = head.target.find('?');
  req.path = httplib::detail::decode_url(head.target.substr(0, q), false);
  if (q != std::string::npos) {
    httplib::detail::parse_query_text(head.target.substr(q + 1), req.params);
  }
  for (const auto& [name, value] : head.headers) req.headers.emplace(name, value);
  req.remote_addr = c.remote_addr;
  req.remote_port = c.remote_port;
  req.local_addr = c.local_addr;
  req.local_port = c.local_port;
  p->keep_alive = head.keep_alive;
  return p;
}

}  // namespace

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ConnectionDriver::ConnectionDriver(const HttpServerOptions& options,
                                   const HttpHeadCheck& head_check, int epoll_fd, HandlerPool& pool,
                                   HttpCounters& counters,
                                   std::function<void(const Connection&)> forget)
    : options_(options),
      head_check_(head_check),
      epoll_fd_(epoll_fd),
      pool_(pool),
      counters_(counters),
      forget_(std::move(forget)) {}

void ConnectionDriver::Register(Connection& c, uint32_t events) {
  if (c.registered == events || c.detached) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  ::epoll_ctl(epoll_fd_, c.registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
  c.registered = events;
}

void ConnectionDriver::UpdateInterest(Connection& c, bool want_write) {
  uint32_t events = 0;
  if (!c.read_stopped && c.queue.size() < options_.max_pipelined) events |= EPOLLIN | EPOLLRDHUP;
  if (want_write || (c.read_wants_write && !c.read_stopped)) events |= EPOLLOUT;
  if (c.write_wants_read) events |= EPOLLIN | EPOLLRDHUP;
  Register(c, events);
}

void ConnectionDriver::OnEvent(const std::shared_ptr<Connection>& c, uint32_t events) {
  if (c->lingering) {
    Drain(c);
    return;
  }
  if (c->handshaking) {
    Handshake(c);
    return;
  }
  const bool read_wants_write = c->read_wants_write;
  if ((events & EPOLLOUT) || (c->write_wants_read && (events & (EPOLLIN | EPOLLRDHUP)))) {
    Flush(c);
  }
  if (c->closed) return;
  if (!c->read_stopped && ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
                           (read_wants_write && (events & EPOLLOUT)))) {
    OnReadable(c);
  } else if (events & (EPOLLHUP | EPOLLERR)) {
    OnHangUp(c);
  }
}

// The peer is gone and nothing more is read: close, or once its handler returns.
void ConnectionDriver::OnHangUp(const std::shared_ptr<Connection>& c) {
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->dead = true;
  }
  c->drained.notify_all();
  if (!c->busy) {
    Close(c);
  } else {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
    c->detached = true;
  }
}

void ConnectionDriver::OnHandlerEvent(const std::shared_ptr<Connection>& c, bool finished) {
  if (finished) {
    c->busy = false;
    bool close;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      close = c->close_requested;
    }
    if (close) {
      // Nothing after an answer that closes the connection is answered.
      c->close_after = true;
      c->read_stopped = true;
      c->queue.clear();
      c->in.clear();
      c->pending_error.clear();
    }
    if (c->detached) {
      Close(c);
      return;
    }
  }
  Flush(c);
  if (c->closed || !finished) return;
  Parse(c);  // requests the queue limit held back
  if (c->closed) return;
  Dispatch(c);
  // Bytes the TLS session already decrypted raise no epoll event: read them now.
  if (!c->closed && c->ssl != nullptr && !c->read_stopped &&
      c->queue.size() < options_.max_pipelined && SSL_has_pending(c->ssl)) {
    OnReadable(c);
  }
}

// --- Transport: the socket, or the TLS session over it.

// Reads up to `n` bytes into `buf` (*got: how many).
ConnectionDriver::Io ConnectionDriver::Receive(Connection& c, char* buf, size_t n, size_t* got) {
  if (c.ssl == nullptr) {
    while (true) {
      ssize_t r = ::recv(c.fd, buf, n, 0);
      if (r > 0) {
        *got = static_cast<size_t>(r);
        return Io::kDone;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWouldBlock;
      return Io::kClosed;  // 0: the peer closed its side; < 0: reset
    }
  }
  c.read_wants_write = false;
  if (c.tls_done) return Io::kClosed;
  ERR_clear_error();
  const int r = SSL_read(c.ssl, buf, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (r > 0) {
    *got = static_cast<size_t>(r);
    return Io::kDone;
  }
  switch (SSL_get_error(c.ssl, r)) {
    case SSL_ERROR_WANT_READ:
      return Io::kWouldBlock;
    case SSL_ERROR_WANT_WRITE:
      c.read_wants_write = true;
      return Io::kWouldBlock;
    case SSL_ERROR_ZERO_RETURN:
      return Io::kClosed;  // close_notify: answered by SSL_shutdown in Close
    default:
      c.tls_done = true;  // reset, EOF without close_notify, or a protocol error
      ERR_clear_error();
      return Io::kClosed;
  }
}

// Writes up to `n` bytes of `data` (*sent: how many).
ConnectionDriver::Io ConnectionDriver::Send(Connection& c, const char* data, size_t n,
                                            size_t* sent) {
  if (c.ssl == nullptr) {
    while (true) {
      ssize_t r = ::send(c.fd, data, n, MSG_NOSIGNAL);
      if (r > 0) {
        *sent = static_cast<size_t>(r);
        return Io::kDone;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWouldBlock;
      return Io::kClosed;
    }
  }
  c.write_wants_read = false;
  if (c.tls_done) return Io::kClosed;
  ERR_clear_error();
  const int r = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  if (r > 0) {
    *sent = static_cast<size_t>(r);
    return Io::kDone;
  }
  switch (SSL_get_error(c.ssl, r)) {
    case SSL_ERROR_WANT_WRITE:
      return Io::kWouldBlock;
    case SSL_ERROR_WANT_READ:
      c.write_wants_read = true;
      return Io::kWouldBlock;
    default:
      c.tls_done = true;
      ERR_clear_error();
      return Io::kClosed;
  }
}

// Sends close_notify once, best effort (never waits for the peer's).
void ConnectionDriver::TlsShutdown(Connection& c) {
  if (c.ssl == nullptr || c.tls_done || c.handshaking) return;
  c.tls_done = true;
  ERR_clear_error();
  SSL_shutdown(c.ssl);
  ERR_clear_error();
}

// Drives the TLS handshake of `c` one step; once it is done, reads what the client sent.
void ConnectionDriver::Handshake(const std::shared_ptr<Connection>& c) {
  ERR_clear_error();
  const int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    c->handshaking = false;
    c->last_activity_ms = NowMs();
    UpdateInterest(*c, false);
    OnReadable(c);  // a request may already sit in the session's buffer
    return;
  }
  const int error = SSL_get_error(c->ssl, r);
  if (error == SSL_ERROR_WANT_READ) {
    Register(*c, EPOLLIN | EPOLLRDHUP);
    return;
  }
  if (error == SSL_ERROR_WANT_WRITE) {
    Register(*c, EPOLLOUT);
    return;
  }
  const unsigned long first = ERR_peek_error();
  const bool plain_http =
      ERR_GET_LIB(first) == ERR_LIB_SSL && ERR_GET_REASON(first) == SSL_R_HTTP_REQUEST;
  std::string reason = DrainOpenSslErrors();
  if (reason.empty()) reason = "the client closed the connection during the handshake";
  counters_.tls_failures++;
  spdlog::debug("event=tls_handshake_failed remote={}:{} reason=\"{}\"", c->remote_addr,
                c->remote_port, reason);
  c->tls_done = true;
  if (!plain_http) {
    Close(c);
    return;
  }
  AnswerPlainHttp(c);
}

// A plain-HTTP client on the HTTPS port: OpenSSL sent nothing (no alert), so answer in its
// language, then close the way any refused client is closed (lingering).
void ConnectionDriver::AnswerPlainHttp(const std::shared_ptr<Connection>& c) {
  SSL_free(c->ssl);
  c->ssl = nullptr;
  c->handshaking = false;
  c->read_stopped = true;
  c->close_after = true;
  c->linger = true;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->out = ErrorResponse(400, "invalid_argument",
                           "this port serves HTTPS: a plain HTTP request was sent; use https://");
  }
  Flush(c);
}

// --- Requests: bytes in, requests to the handler pool, refusals answered in order.

void ConnectionDriver::OnReadable(const std::shared_ptr<Connection>& c) {
  char buf[65536];
  bool eof = false;
  while (!c->read_stopped) {
    size_t n = 0;
    const Io io = Receive(*c, buf, sizeof(buf), &n);
    if (io == Io::kDone) {
      c->in.append(buf, n);
      c->last_activity_ms = NowMs();
      // Bounded: never buffer more than one request's worth beyond the parser's limits.
      if (c->in.size() > options_.max_header_bytes + options_.max_body_bytes + 65536) break;
      continue;
    }
    if (io == Io::kWouldBlock) break;
    eof = true;  // the peer closed its side, or reset
    break;
  }
  Parse(c);
  if (c->closed) return;
  if (eof) {
    c->read_stopped = true;
    c->close_after = true;
    if (!c->reader.reading_head() || !c->in.empty()) {
      c->in.clear();  // an incomplete request: nothing to answer
      c->current.reset();
      c->reader.Reset();
    }
    Flush(c);
  }
}

// Parses as many requests out of c.in as it holds.
void ConnectionDriver::Parse(const std::shared_ptr<Connection>& c) {
  while (!c->read_stopped) {
    if (c->queue.size() >= options_.max_pipelined) break;
    size_t consumed = 0;
    const Http1Event event = c->reader.Read(c->in, &consumed);
    c->in.erase(0, consumed);
    if (event == Http1Event::kNeedMore) {
      if (c->reader.reading_head()) {
        // The header timeout runs from the first byte of a request (empty lines excepted).
        if (c->in.empty()) {
          c->request_started_ms = 0;
        } else if (c->request_started_ms == 0) {
          c->request_started_ms = NowMs();
        }
      }
      break;
    }
    if (event == Http1Event::kError) {
      const Http1Error& e = c->reader.error();
      return Fail(c, {e.status, ReaderErrorCode(e.status), e.message});
    }
    if (event == Http1Event::kRequest) {
      Complete(c);
      continue;
    }
    // kHead: admitted or refused before its body is read.
    if (c->request_started_ms == 0) c->request_started_ms = NowMs();
    const Http1Request& head = c->reader.request();
    if (!Admit(c, head)) return;
    if (head.expect_continue) {
      std::lock_guard<std::mutex> lock(c->mu);
      c->out += kContinueResponse;
    }
  }
  UpdateInterest(*c, !c->out.empty());
}

// Runs the head check on the request `head` begins. Admitted: it becomes c->current (its body
// is read next). Refused: the refusal is answered once the earlier requests are, and nothing more
// is read; false.
bool ConnectionDriver::Admit(const std::shared_ptr<Connection>& c, const Http1Request& head) {
  std::unique_ptr<ParsedRequest> p = HandlerRequest(*c, head);
  if (head_check_) {
    httplib::Response refusal;
    bool admitted = false;
    try {
      admitted = head_check_(p->req, refusal);
    } catch (const std::exception& e) {
      spdlog::error("event=http_exception error=\"{}\"", e.what());
      refusal = httplib::Response();
      refusal.status = 500;
    }
    if (!admitted) {
      c->reader.Reset();
      c->read_stopped = true;
      c->linger = true;
      c->in.clear();
      c->pending_error = SerializeResponse(refusal, /*keep_alive=*/false);
      Dispatch(c);
      return false;
    }
  }
  c->current = std::move(p);
  return true;
}

void ConnectionDriver::Complete(const std::shared_ptr<Connection>& c) {
  std::unique_ptr<ParsedRequest> p = std::move(c->current);
  p->req.body = c->reader.TakeRequest().body;
  c->request_started_ms = 0;
  if (!p->keep_alive) {
    // Nothing after a request that closes the connection is read.
    c->read_stopped = true;
    c->in.clear();
  }
  counters_.requests++;
  c->queue.push_back(std::move(p));
  Dispatch(c);
}

// Hands the next queued request to the pool, or answers a pending parse error.
void ConnectionDriver::Dispatch(const std::shared_ptr<Connection>& c) {
  if (c->busy) return;
  if (!c->queue.empty()) {
    c->busy = true;
    std::unique_ptr<ParsedRequest> p = std::move(c->queue.front());
    c->queue.pop_front();
    pool_.Submit(c, std::move(p));
    UpdateInterest(*c, false);
    return;
  }
  if (!c->pending_error.empty()) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->out += c->pending_error;
    }
    c->pending_error.clear();
    c->close_after = true;
    Flush(c);
  }
}

void ConnectionDriver::Fail(const std::shared_ptr<Connection>& c, const ParseError& e) {
  c->read_stopped = true;
  c->linger = true;
  c->in.clear();
  c->current.reset();
  c->pending_error = ErrorResponse(e.status, e.code, e.message);
  Dispatch(c);
}

// --- Output and the end of a connection.

// Writes what it can of c.out; true when nothing is left to write (all of it written, or the
// peer is gone: then the connection is marked to close).
bool ConnectionDriver::WriteOut(Connection& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  size_t sent = 0;
  while (sent < c.out.size()) {
    size_t n = 0;
    const Io io = Send(c, c.out.data() + sent, c.out.size() - sent, &n);
    if (io == Io::kDone) {
      sent += n;
      continue;
    }
    if (io == Io::kWouldBlock) break;
    c.out.clear();  // the peer is gone
    c.dead = true;
    sent = 0;
    break;
  }
  if (sent > 0) {
    c.out.erase(0, sent);
    c.last_activity_ms = NowMs();
  }
  bool empty = c.out.empty();
  if (c.dead) {
    c.drained.notify_all();
    empty = true;
    c.close_after = true;
    c.read_stopped = true;
  }
  return empty;
}

void ConnectionDriver::Flush(const std::shared_ptr<Connection>& c) {
  const bool empty = WriteOut(*c);
  c->drained.notify_all();
  if (!empty) {
    if (c->write_blocked_ms == 0) c->write_blocked_ms = NowMs();
    UpdateInterest(*c, true);
    return;
  }
  c->write_blocked_ms = 0;
  if (c->close_after && !c->busy && c->queue.empty() && c->pending_error.empty()) {
    if (c->linger && !c->lingering) {
      StartLinger(c);
      return;
    }
    if (!c->lingering) Close(c);
    return;
  }
  UpdateInterest(*c, false);
}

// The answer of a refused client is written: stop sending, then read what it still sends raw and
// discard it (Drain) until it stops, or kLingerMs or kMaxLingerBytes pass.
void ConnectionDriver::StartLinger(const std::shared_ptr<Connection>& c) {
  TlsShutdown(*c);  // then what the client still sends is read raw and discarded
  ::shutdown(c->fd, SHUT_WR);
  c->lingering = true;
  c->linger_until_ms = NowMs() + kLingerMs;
  c->detached = false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = c->id;
  ::epoll_ctl(epoll_fd_, c->registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev);
  c->registered = ev.events;
}

// Reads and discards what a refused client still sends; closes at its end or the limit.
void ConnectionDriver::Drain(const std::shared_ptr<Connection>& c) {
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c->lingered_bytes += static_cast<size_t>(n);
      if (c->lingered_bytes > kMaxLingerBytes) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;
  }
  Close(c);
}

void ConnectionDriver::Close(const std::shared_ptr<Connection>& c) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  if (c->ssl != nullptr) {
    TlsShutdown(*c);
    SSL_free(c->ssl);
    c->ssl = nullptr;
  }
  ::close(c->fd);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->dead = true;
  }
  c->drained.notify_all();
  c->closed = true;
  forget_(*c);
}

}  // namespace inac::http
