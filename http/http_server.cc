#include "http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "http/http1_reader.h"
#include "http/tls_context.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace inac::http {
namespace {

// A streaming response waits while this much of it is not yet written to the client.
constexpr size_t kMaxPendingOutput = 1 << 20;
constexpr int kTickMs = 50;
// A refused client is read (and ignored) this long, or this much, before its connection closes.
constexpr int64_t kLingerMs = 2000;
constexpr size_t kMaxLingerBytes = 4 << 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* Reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";  // the dashboard's files (northbound/web_assets.h)
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 421:
      return "Misdirected Request";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

// A whole answer with INAC's error body, closing the connection.
std::string ErrorResponse(int status, const std::string& code, const std::string& message) {
  nlohmann::ordered_json err = nlohmann::ordered_json::object();
  err["code"] = code;
  err["message"] = message;
  err["field"] = "";
  const std::string body = nlohmann::ordered_json{{"error", err}}.dump();
  return absl::StrCat("HTTP/1.1 ", status, " ", Reason(status),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

// A whole answer without a streamed body.
std::string Serialize(const httplib::Response& res, bool keep_alive) {
  const int status = res.status < 100 ? 500 : res.status;
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\n");
  for (const auto& [k, v] : res.headers) {
    if (absl::EqualsIgnoreCase(k, "Content-Length") ||
        absl::EqualsIgnoreCase(k, "Transfer-Encoding") || absl::EqualsIgnoreCase(k, "Connection")) {
      continue;
    }
    absl::StrAppend(&out, k, ": ", v, "\r\n");
  }
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close",
                  "\r\nContent-Length: ", res.body.size(), "\r\n\r\n", res.body);
  return out;
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

struct Parsed {
  httplib::Request req;
  bool keep_alive = true;
};

// A parse failure: the status and error body to answer before closing.
struct ParseError {
  int status;
  const char* code;
  std::string message;
};

// The error body's code for a refusal of the request reader (http/http1_reader.h).
const char* ReaderErrorCode(int status) {
  switch (status) {
    case 413:
      return "payload_too_large";
    case 414:
      return "uri_too_long";
    case 431:
      return "request_header_fields_too_large";
    case 501:
      return "unimplemented";
    default:
      return "invalid_argument";  // 400, 505
  }
}

// The outcome of one read or write on a connection (plain socket or TLS session).
enum class Io { kDone, kWouldBlock, kClosed };

}  // namespace

struct Conn {
  int fd = -1;
  uint64_t id = 0;
  std::string remote_addr;
  int remote_port = 0;
  std::string local_addr;
  int local_port = 0;

  // Loop-thread state.
  http::Http1Reader reader;  // the HTTP/1.1 framing of `in`
  std::string in;
  std::unique_ptr<Parsed> current;  // the request whose body is being read
  int64_t request_started_ms = 0;   // first byte of the request being read (0: none)
  int64_t last_activity_ms = 0;
  std::deque<std::unique_ptr<Parsed>> queue;  // complete, waiting for a handler
  bool busy = false;                          // one of its requests is with a handler
  bool read_stopped = false;                  // no more requests are read (close, error, EOF)
  bool close_after = false;                   // close once answered and written
  std::string pending_error;                  // answered once the earlier requests are
  uint32_t registered = 0;                    // epoll events
  bool detached = false;         // removed from epoll: the peer is gone, a handler still runs
  int64_t write_blocked_ms = 0;  // since when `out` could not be written fully

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

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  HttpHeadCheck head_check;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<bool> entered{false};
  std::mutex serve_mu;
  std::condition_variable serve_cv;
  bool serve_done = false;

  // Loop-thread state.
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;
  std::map<std::string, size_t> per_client;
  bool listen_paused = false;

  // Handler pool.
  std::mutex work_mu;
  std::condition_variable work_cv;
  std::deque<std::pair<std::shared_ptr<Conn>, std::unique_ptr<Parsed>>> work;
  bool workers_stop = false;
  std::vector<std::thread> workers;

  // Handler threads -> loop: connections with new output or a finished request.
  std::mutex done_mu;
  std::vector<std::pair<uint64_t, bool>> done;  // (connection id, request finished)

  std::atomic<int64_t> accepted{0}, refused{0}, timed_out{0}, requests{0}, open{0}, tls_failures{0};
  std::unique_ptr<TlsServerContext> tls;  // HTTPS when set (loaded by Bind)

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }
  void Notify(uint64_t id, bool finished) {
    {
      std::lock_guard<std::mutex> lock(done_mu);
      done.emplace_back(id, finished);
    }
    Wake();
  }

  void Register(Conn& c, uint32_t events) {
    if (c.registered == events || c.detached) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c.id;
    ::epoll_ctl(epoll_fd, c.registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
    c.registered = events;
  }
  void UpdateInterest(Conn& c, bool want_write) {
    uint32_t events = 0;
    if (!c.read_stopped && c.queue.size() < options.max_pipelined) events |= EPOLLIN | EPOLLRDHUP;
    if (want_write || (c.read_wants_write && !c.read_stopped)) events |= EPOLLOUT;
    if (c.write_wants_read) events |= EPOLLIN | EPOLLRDHUP;
    Register(c, events);
  }

  // --- Transport: the socket, or the TLS session over it. Loop thread only.

  // Reads up to `n` bytes into `buf` (*got: how many).
  Io Receive(Conn& c, char* buf, size_t n, size_t* got) {
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
  Io Send(Conn& c, const char* data, size_t n, size_t* sent) {
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
  void TlsShutdown(Conn& c) {
    if (c.ssl == nullptr || c.tls_done || c.handshaking) return;
    c.tls_done = true;
    ERR_clear_error();
    SSL_shutdown(c.ssl);
    ERR_clear_error();
  }

  // Drives the TLS handshake of `c` one step; once it is done, reads what the client sent.
  void Handshake(const std::shared_ptr<Conn>& c) {
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
    tls_failures++;
    spdlog::debug("event=tls_handshake_failed remote={}:{} reason=\"{}\"", c->remote_addr,
                  c->remote_port, reason);
    c->tls_done = true;
    if (!plain_http) {
      Close(c);
      return;
    }
    // A plain-HTTP client: OpenSSL sent nothing (no alert), so answer in its language, then
    // close the way any refused client is closed (lingering).
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

  void Close(const std::shared_ptr<Conn>& c) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
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
    auto it = per_client.find(c->remote_addr);
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
    conns.erase(c->id);
    open--;
  }

  // Writes what it can of `out`; closes the connection once all is written and it should close.
  void Flush(const std::shared_ptr<Conn>& c) {
    bool empty;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      size_t sent = 0;
      while (sent < c->out.size()) {
        size_t n = 0;
        const Io io = Send(*c, c->out.data() + sent, c->out.size() - sent, &n);
        if (io == Io::kDone) {
          sent += n;
          continue;
        }
        if (io == Io::kWouldBlock) break;
        c->out.clear();  // the peer is gone
        c->dead = true;
        sent = 0;
        break;
      }
      if (sent > 0) {
        c->out.erase(0, sent);
        c->last_activity_ms = NowMs();
      }
      empty = c->out.empty();
      if (c->dead) {
        c->drained.notify_all();
        empty = true;
        c->close_after = true;
        c->read_stopped = true;
      }
    }
    c->drained.notify_all();
    if (!empty) {
      if (c->write_blocked_ms == 0) c->write_blocked_ms = NowMs();
      UpdateInterest(*c, true);
      return;
    }
    c->write_blocked_ms = 0;
    if (c->close_after && !c->busy && c->queue.empty() && c->pending_error.empty()) {
      if (c->linger && !c->lingering) {
        TlsShutdown(*c);  // then what the client still sends is read raw and discarded
        ::shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->linger_until_ms = NowMs() + kLingerMs;
        c->detached = false;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = c->id;
        ::epoll_ctl(epoll_fd, c->registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev);
        c->registered = ev.events;
        return;
      }
      if (!c->lingering) Close(c);
      return;
    }
    UpdateInterest(*c, false);
  }

  // Hands the next queued request to the pool, or answers a pending parse error.
  void Dispatch(const std::shared_ptr<Conn>& c) {
    if (c->busy) return;
    if (!c->queue.empty()) {
      c->busy = true;
      std::unique_ptr<Parsed> p = std::move(c->queue.front());
      c->queue.pop_front();
      {
        std::lock_guard<std::mutex> lock(work_mu);
        work.emplace_back(c, std::move(p));
      }
      work_cv.notify_one();
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

  // Stops reading `c` and answers `e` once the requests before it are answered.
  void Fail(const std::shared_ptr<Conn>& c, const ParseError& e) {
    c->read_stopped = true;
    c->linger = true;
    c->in.clear();
    c->current.reset();
    c->pending_error = ErrorResponse(e.status, e.code, e.message);
    Dispatch(c);
  }

  http::Http1Limits ReaderLimits() const {
    http::Http1Limits limits;
    limits.max_request_line_bytes = options.max_request_line_bytes;
    limits.max_header_bytes = options.max_header_bytes;
    limits.max_headers = options.max_headers;
    limits.max_body_bytes = options.max_body_bytes;
    return limits;
  }

  // The handlers' request for a head the reader read (its body comes with Complete).
  std::unique_ptr<Parsed> HandlerRequest(const Conn& c, const http::Http1Request& head) {
    auto p = std::make_unique<Parsed>();
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

  // Parses as many requests out of c.in as it holds.
  void Parse(const std::shared_ptr<Conn>& c) {
    while (!c->read_stopped) {
      if (c->queue.size() >= options.max_pipelined) break;
      size_t consumed = 0;
      const http::Http1Event event = c->reader.Read(c->in, &consumed);
      c->in.erase(0, consumed);
      if (event == http::Http1Event::kNeedMore) {
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
      if (event == http::Http1Event::kError) {
        const http::Http1Error& e = c->reader.error();
        return Fail(c, {e.status, ReaderErrorCode(e.status), e.message});
      }
      if (event == http::Http1Event::kRequest) {
        Complete(c);
        continue;
      }
      // kHead: admitted or refused before its body is read.
      if (c->request_started_ms == 0) c->request_started_ms = NowMs();
      const http::Http1Request& head = c->reader.request();
      std::unique_ptr<Parsed> p = HandlerRequest(*c, head);
      if (head_check) {
        httplib::Response refusal;
        bool admitted = false;
        try {
          admitted = head_check(p->req, refusal);
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
          c->pending_error = Serialize(refusal, /*keep_alive=*/false);
          Dispatch(c);
          return;
        }
      }
      if (head.expect_continue) {
        std::lock_guard<std::mutex> lock(c->mu);
        c->out += "HTTP/1.1 100 Continue\r\n\r\n";
      }
      c->current = std::move(p);
    }
    UpdateInterest(*c, !c->out.empty());
  }

  void Complete(const std::shared_ptr<Conn>& c) {
    std::unique_ptr<Parsed> p = std::move(c->current);
    p->req.body = c->reader.TakeRequest().body;
    c->request_started_ms = 0;
    if (!p->keep_alive) {
      // Nothing after a request that closes the connection is read.
      c->read_stopped = true;
      c->in.clear();
    }
    requests++;
    c->queue.push_back(std::move(p));
    Dispatch(c);
  }

  void OnReadable(const std::shared_ptr<Conn>& c) {
    char buf[65536];
    bool eof = false;
    while (!c->read_stopped) {
      size_t n = 0;
      const Io io = Receive(*c, buf, sizeof(buf), &n);
      if (io == Io::kDone) {
        c->in.append(buf, n);
        c->last_activity_ms = NowMs();
        // Bounded: never buffer more than one request's worth beyond the parser's limits.
        if (c->in.size() > options.max_header_bytes + options.max_body_bytes + 65536) break;
        continue;
      }
      if (io == Io::kWouldBlock) break;
      eof = true;  // the peer closed its side, or reset
      break;
    }
    Parse(c);
    if (conns.count(c->id) == 0) return;
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

  void Accept() {
    while (true) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop accepting for a tick rather than spin on the listener.
          ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          listen_paused = true;
          spdlog::warn("event=http_accept_paused error=\"{}\"", std::strerror(errno));
        }
        return;
      }
      char host[INET6_ADDRSTRLEN] = {0};
      int port = 0;
      if (addr.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
      } else if (addr.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
      }
      accepted++;
      const std::string remote(host);
      if (conns.size() >= options.max_connections ||
          per_client[remote] >= options.max_connections_per_client) {
        if (per_client[remote] == 0) per_client.erase(remote);
        refused++;
        if (tls) {  // a 503 would need the handshake the cap exists to avoid
          ::close(fd);
          continue;
        }
        const std::string answer = ErrorResponse(
            503, "unavailable",
            conns.size() >= options.max_connections
                ? absl::StrCat("too many open connections (at most ", options.max_connections,
                               "); retry later")
                : absl::StrCat("too many open connections from ", remote, " (at most ",
                               options.max_connections_per_client, "); retry later"));
        [[maybe_unused]] ssize_t n =
            ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_shared<Conn>();
      c->reader = http::Http1Reader(ReaderLimits());
      c->fd = fd;
      c->id = next_id++;
      c->remote_addr = remote;
      c->remote_port = port;
      sockaddr_storage local{};
      socklen_t local_len = sizeof(local);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
          local.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&local);
        char l[INET_ADDRSTRLEN] = {0};
        ::inet_ntop(AF_INET, &a->sin_addr, l, sizeof(l));
        c->local_addr = l;
        c->local_port = ntohs(a->sin_port);
      }
      c->last_activity_ms = NowMs();
      if (tls) {
        c->ssl = tls->NewSession(fd);
        if (c->ssl == nullptr) {
          spdlog::warn("event=tls_session_failed error=\"{}\"", DrainOpenSslErrors());
          ::close(fd);
          continue;
        }
        c->handshaking = true;
        c->accepted_ms = c->last_activity_ms;
      }
      per_client[remote]++;
      open++;
      conns[c->id] = c;
      if (c->handshaking) {
        Register(*c, EPOLLIN | EPOLLRDHUP);
      } else {
        UpdateInterest(*c, false);
      }
    }
  }

  // Reads and discards what a refused client still sends; closes at its end or the limit.
  void Drain(const std::shared_ptr<Conn>& c) {
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

  void CheckTimeouts() {
    const int64_t now = NowMs();
    std::vector<std::shared_ptr<Conn>> expired, idle, stuck, lingered, handshakes;
    for (auto& [id, c] : conns) {
      if (c->handshaking) {
        if (now - c->accepted_ms > options.header_timeout_ms) handshakes.push_back(c);
        continue;
      }
      if (c->lingering) {
        if (now > c->linger_until_ms) lingered.push_back(c);
        continue;
      }
      if (c->write_blocked_ms != 0 && now - c->write_blocked_ms > options.write_timeout_ms) {
        stuck.push_back(c);
      } else if (c->request_started_ms != 0 && !c->read_stopped) {
        const int64_t limit = c->reader.reading_head()
                                  ? options.header_timeout_ms
                                  : options.header_timeout_ms + options.body_timeout_ms;
        if (now - c->request_started_ms > limit) expired.push_back(c);
      } else if (!c->busy && c->queue.empty() && c->in.empty() && c->pending_error.empty() &&
                 c->write_blocked_ms == 0 && now - c->last_activity_ms > options.idle_timeout_ms) {
        idle.push_back(c);
      }
    }
    for (auto& c : lingered) Close(c);
    for (auto& c : handshakes) {
      timed_out++;
      spdlog::debug("event=tls_handshake_timeout remote={}:{}", c->remote_addr, c->remote_port);
      Close(c);
    }
    for (auto& c : stuck) {
      timed_out++;
      Close(c);
    }
    for (auto& c : expired) {
      timed_out++;
      Fail(c, {408, "request_timeout",
               c->reader.reading_head() ? "the request headers did not arrive in time"
                                        : "the request body did not arrive in time"});
    }
    for (auto& c : idle) {
      c->close_after = true;
      c->read_stopped = true;
      Flush(c);
    }
  }

  void HandleDone() {
    std::vector<std::pair<uint64_t, bool>> batch;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      batch.swap(done);
    }
    for (const auto& [id, finished] : batch) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      std::shared_ptr<Conn> c = it->second;
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
          continue;
        }
      }
      Flush(c);
      if (conns.count(id) == 0) continue;
      if (finished) {
        Parse(c);  // requests the queue limit held back
        if (conns.count(id) == 0) continue;
        Dispatch(c);
        // Bytes the TLS session already decrypted raise no epoll event: read them now.
        if (conns.count(id) != 0 && c->ssl != nullptr && !c->read_stopped &&
            c->queue.size() < options.max_pipelined && SSL_has_pending(c->ssl)) {
          OnReadable(c);
        }
      }
    }
  }

  void Loop() {
    epoll_event events[256];
    int64_t last_tick = NowMs();
    while (!stop) {
      int n = ::epoll_wait(epoll_fd, events, 256, kTickMs);
      for (int i = 0; i < n && !stop; ++i) {
        const uint64_t key = events[i].data.u64;
        if (key == 0) {
          Accept();
          continue;
        }
        if (key == UINT64_MAX) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_fd, &v, sizeof(v));
          HandleDone();
          continue;
        }
        auto it = conns.find(key);
        if (it == conns.end()) continue;
        std::shared_ptr<Conn> c = it->second;
        const uint32_t e = events[i].events;
        if (c->lingering) {
          Drain(c);
          continue;
        }
        if (c->handshaking) {
          Handshake(c);
          continue;
        }
        const bool read_wants_write = c->read_wants_write;
        if ((e & EPOLLOUT) || (c->write_wants_read && (e & (EPOLLIN | EPOLLRDHUP)))) Flush(c);
        if (conns.count(key) == 0) continue;
        if (!c->read_stopped && ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
                                 (read_wants_write && (e & EPOLLOUT)))) {
          OnReadable(c);
        } else if (e & (EPOLLHUP | EPOLLERR)) {
          // The peer is gone and nothing more is read: close, or once its handler returns.
          {
            std::lock_guard<std::mutex> lock(c->mu);
            c->dead = true;
          }
          c->drained.notify_all();
          if (!c->busy) {
            Close(c);
          } else {
            ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
            c->detached = true;
          }
        }
      }
      const int64_t now = NowMs();
      if (now - last_tick >= kTickMs) {
        last_tick = now;
        if (listen_paused) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = 0;
          if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) == 0) listen_paused = false;
        }
        CheckTimeouts();
      }
    }
    std::vector<std::shared_ptr<Conn>> all;
    for (auto& [id, c] : conns) all.push_back(c);
    for (auto& c : all) Close(c);
  }

  // --- Handler threads

  void WorkerMain() {
    while (true) {
      std::shared_ptr<Conn> c;
      std::unique_ptr<Parsed> p;
      {
        std::unique_lock<std::mutex> lock(work_mu);
        work_cv.wait(lock, [this] { return workers_stop || !work.empty(); });
        if (work.empty()) return;
        c = std::move(work.front().first);
        p = std::move(work.front().second);
        work.pop_front();
      }
      Run(c, *p);
      Notify(c->id, true);
    }
  }

  // Appends `data` to the connection's output for the loop to write; false when the connection
  // is gone. Waits while too much is pending (a slow reader slows its stream, nothing else).
  bool Emit(const std::shared_ptr<Conn>& c, std::string data) {
    {
      std::unique_lock<std::mutex> lock(c->mu);
      c->drained.wait(lock, [&] { return c->dead || c->out.size() < kMaxPendingOutput || stop; });
      if (c->dead || stop) return false;
      c->out += data;
    }
    Notify(c->id, false);
    return true;
  }

  void Run(const std::shared_ptr<Conn>& c, Parsed& p) {
    httplib::Response res;
    res.version = "HTTP/1.1";
    try {
      handler(p.req, res);
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
      std::string out = Serialize(res, keep_alive);
      {
        std::lock_guard<std::mutex> lock(c->mu);
        if (!c->dead) c->out += out;
      }
      if (!keep_alive) MarkClose(c);
      return;
    }
    std::string head = absl::StrCat("HTTP/1.1 ", res.status, " ", Reason(res.status), "\r\n");
    for (const auto& [k, v] : res.headers) {
      if (absl::EqualsIgnoreCase(k, "Content-Length") ||
          absl::EqualsIgnoreCase(k, "Transfer-Encoding") ||
          absl::EqualsIgnoreCase(k, "Connection")) {
        continue;
      }
      absl::StrAppend(&head, k, ": ", v, "\r\n");
    }
    absl::StrAppend(&head, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n");
    // A streamed body, sent chunked whatever the provider kind.
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n\r\n");
    if (!keep_alive) MarkClose(c);
    if (!Emit(c, std::move(head))) return;
    bool ended = false;
    bool failed = false;
    httplib::DataSink sink;
    sink.write = [&](const char* data, size_t n) {
      if (n == 0) return true;
      if (!Emit(c, absl::StrCat(absl::Hex(n), "\r\n", absl::string_view(data, n), "\r\n"))) {
        failed = true;
        return false;
      }
      return true;
    };
    sink.done = [&] { ended = true; };
    sink.is_writable = [&] {
      std::lock_guard<std::mutex> lock(c->mu);
      return !c->dead && !stop;
    };
    size_t offset = 0;
    auto write = sink.write;
    sink.write = [&](const char* data, size_t n) {
      offset += n;
      return write(data, n);
    };
    while (!ended && !failed && !stop) {
      if (!res.content_provider_(offset, 0, sink)) break;
    }
    res.content_provider_success_ = ended && !failed;
    if (ended && !failed) {
      Emit(c, "0\r\n\r\n");
    } else {
      MarkClose(c);  // a stream cut short cannot be framed: the connection ends with it
    }
  }

  // The loop closes the connection once this answer is written (read in HandleDone).
  void MarkClose(const std::shared_ptr<Conn>& c) {
    std::lock_guard<std::mutex> lock(c->mu);
    c->close_requested = true;
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeadCheck head_check)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->handler = std::move(handler);
  impl_->head_check = std::move(head_check);
  impl_->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = UINT64_MAX;
  ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, impl_->wake_fd, &ev);
  for (int i = 0; i < std::max(1, options.workers); ++i) {
    impl_->workers.emplace_back([this] { impl_->WorkerMain(); });
  }
}

HttpServer::~HttpServer() {
  Stop();
  {
    std::lock_guard<std::mutex> lock(impl_->work_mu);
    impl_->workers_stop = true;
  }
  impl_->work_cv.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
  ::close(impl_->epoll_fd);
}

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  if (tls()) {
    auto context =
        TlsServerContext::Load(impl_->options.tls_cert_file, impl_->options.tls_key_file);
    if (!context.ok()) return context.status();
    impl_->tls = *std::move(context);
  } else if (!impl_->options.tls_cert_file.empty() || !impl_->options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate file and a private key file (one was given)");
  }
  // Every connection is a descriptor: allow as many as the caps need (up to the hard limit).
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    const rlim_t want = static_cast<rlim_t>(impl_->options.max_connections) + 1024;
    if (limit.rlim_cur < want) {
      limit.rlim_cur = std::min(want, limit.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (int rc = ::getaddrinfo(h.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind ", host, ":", port, ": ", ::gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR lets a restarted controller bind while old connections linger in TIME_WAIT;
    // SO_REUSEPORT is deliberately not set: a second server on the address must fail.
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":", port, ": ", error));
  }
  SetNonBlocking(fd);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  impl_->listen_fd = fd;
  return bound_port;
}

void HttpServer::Serve() {
  {
    std::lock_guard<std::mutex> lock(impl_->serve_mu);
    if (impl_->stop || impl_->listen_fd < 0) return;
    impl_->entered = true;
    serving_ = true;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, impl_->listen_fd, &ev);
  impl_->Loop();
  {
    std::lock_guard<std::mutex> lock(impl_->serve_mu);
    serving_ = false;
    impl_->serve_done = true;
  }
  impl_->serve_cv.notify_all();
}

void HttpServer::Stop() {
  std::unique_lock<std::mutex> lock(impl_->serve_mu);
  impl_->stop = true;
  impl_->Wake();
  if (impl_->entered) impl_->serve_cv.wait(lock, [this] { return impl_->serve_done; });
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  s.open_connections = impl_->open;
  s.accepted = impl_->accepted;
  s.refused = impl_->refused;
  s.timed_out = impl_->timed_out;
  s.requests = impl_->requests;
  s.tls_handshake_failures = impl_->tls_failures;
  return s;
}

bool HttpServer::tls() const {
  return !impl_->options.tls_cert_file.empty() && !impl_->options.tls_key_file.empty();
}

}  // namespace inac::http
