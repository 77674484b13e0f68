// The server of http/http_server.h: the listening socket, the epoll loop, accepting connections
// under the connection caps, the timeouts, and the wiring of the parts it is made of:
//   - http/http_connection.h: one connection's state machine and I/O, TLS included;
//   - http/http_handler_pool.h: the handler threads and the answers they write;
//   - http/http_response.h: the bytes of answers and of the server's own refusals;
//   - http/http1_reader.h: the HTTP/1.1 framing; http/tls_context.h: the TLS policy.
#include "http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "http/http1_reader.h"
#include "http/http_connection.h"
#include "http/http_handler_pool.h"
#include "http/http_response.h"
#include "http/tls_context.h"
#include "spdlog/spdlog.h"

namespace inac::http {
namespace {

constexpr int kTickMs = 50;
// The epoll keys that are not connections (connections are numbered from 1).
constexpr uint64_t kListenKey = 0;
constexpr uint64_t kWakeKey = UINT64_MAX;

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

Http1Limits ReaderLimits(const HttpServerOptions& options) {
  Http1Limits limits;
  limits.max_request_line_bytes = options.max_request_line_bytes;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_headers = options.max_headers;
  limits.max_body_bytes = options.max_body_bytes;
  return limits;
}

// Every connection is a descriptor: allow as many as the caps need (up to the hard limit).
void RaiseDescriptorLimit(size_t max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    const rlim_t want = static_cast<rlim_t>(max_connections) + 1024;
    if (limit.rlim_cur < want) {
      limit.rlim_cur = std::min(want, limit.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
}

// A listening, non-blocking socket on `host:port` (the first address of `host` that binds).
absl::StatusOr<int> Listen(const std::string& host, int port) {
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
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

// The numeric address and port of `addr` ("" and 0 for a family other than IPv4 and IPv6).
std::pair<std::string, int> NumericAddress(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return {std::string(host), port};
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions options_in, HttpHandler handler, HttpHeadCheck head_check_in)
      : options(std::move(options_in)),
        head_check(std::move(head_check_in)),
        pool(std::move(handler), stop, [this] { Wake(); }),
        driver(options, head_check, epoll_fd, pool, counters,
               [this](const Connection& c) { Forget(c); }) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeKey;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
    pool.Start(options.workers);
  }

  const HttpServerOptions options;
  const HttpHeadCheck head_check;
  int listen_fd = -1;
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::atomic<bool> stop{false};
  std::atomic<bool> entered{false};
  std::mutex serve_mu;
  std::condition_variable serve_cv;
  bool serve_done = false;

  // Loop-thread state.
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> conns;
  std::map<std::string, size_t> per_client;
  bool listen_paused = false;

  HttpCounters counters;
  std::unique_ptr<TlsServerContext> tls;  // HTTPS when set (loaded by Bind)
  HandlerPool pool;
  ConnectionDriver driver;

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }

  // A connection closed (ConnectionDriver::Close): drop it from the tables.
  void Forget(const Connection& c) {
    auto it = per_client.find(c.remote_addr);
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
    conns.erase(c.id);
    counters.open--;
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
      const auto [remote, port] = NumericAddress(addr);
      counters.accepted++;
      if (conns.size() >= options.max_connections ||
          per_client[remote] >= options.max_connections_per_client) {
        if (per_client[remote] == 0) per_client.erase(remote);
        counters.refused++;
        Refuse(fd, remote);
        continue;
      }
      Open(fd, remote, port);
    }
  }

  // Closes `fd`, over a connection cap: after a 503 over HTTP; at once over TLS, where a 503 would
  // need the handshake the cap exists to avoid.
  void Refuse(int fd, const std::string& remote) {
    if (tls) {
      ::close(fd);
      return;
    }
    const std::string answer =
        ErrorResponse(503, "unavailable",
                      conns.size() >= options.max_connections
                          ? absl::StrCat("too many open connections (at most ",
                                         options.max_connections, "); retry later")
                          : absl::StrCat("too many open connections from ", remote, " (at most ",
                                         options.max_connections_per_client, "); retry later"));
    [[maybe_unused]] ssize_t n =
        ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
  }

  // Makes the accepted socket `fd` a connection (its TLS session in accept state over HTTPS) and
  // watches it.
  void Open(int fd, const std::string& remote, int port) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_shared<Connection>();
    c->reader = Http1Reader(ReaderLimits(options));
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
        return;
      }
      c->handshaking = true;
      c->accepted_ms = c->last_activity_ms;
    }
    per_client[remote]++;
    counters.open++;
    conns[c->id] = c;
    if (c->handshaking) {
      driver.Register(*c, EPOLLIN | EPOLLRDHUP);
    } else {
      driver.UpdateInterest(*c, false);
    }
  }

  void CheckTimeouts() {
    const int64_t now = NowMs();
    std::vector<std::shared_ptr<Connection>> expired, idle, stuck, lingered, handshakes;
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
    for (auto& c : lingered) driver.Close(c);
    for (auto& c : handshakes) {
      counters.timed_out++;
      spdlog::debug("event=tls_handshake_timeout remote={}:{}", c->remote_addr, c->remote_port);
      driver.Close(c);
    }
    for (auto& c : stuck) {
      counters.timed_out++;
      driver.Close(c);
    }
    for (auto& c : expired) {
      counters.timed_out++;
      driver.Fail(c, {408, "request_timeout",
                      c->reader.reading_head() ? "the request headers did not arrive in time"
                                               : "the request body did not arrive in time"});
    }
    for (auto& c : idle) {
      c->close_after = true;
      c->read_stopped = true;
      driver.Flush(c);
    }
  }

  // What the handler threads reported: output to write, requests finished.
  void HandleDone() {
    for (const auto& [id, finished] : pool.TakeEvents()) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      std::shared_ptr<Connection> c = it->second;
      driver.OnHandlerEvent(c, finished);
    }
  }

  void Loop() {
    epoll_event events[256];
    int64_t last_tick = NowMs();
    while (!stop) {
      int n = ::epoll_wait(epoll_fd, events, 256, kTickMs);
      for (int i = 0; i < n && !stop; ++i) {
        const uint64_t key = events[i].data.u64;
        if (key == kListenKey) {
          Accept();
          continue;
        }
        if (key == kWakeKey) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_fd, &v, sizeof(v));
          HandleDone();
          continue;
        }
        auto it = conns.find(key);
        if (it == conns.end()) continue;
        std::shared_ptr<Connection> c = it->second;
        driver.OnEvent(c, events[i].events);
      }
      const int64_t now = NowMs();
      if (now - last_tick >= kTickMs) {
        last_tick = now;
        if (listen_paused) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = kListenKey;
          if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) == 0) listen_paused = false;
        }
        CheckTimeouts();
      }
    }
    std::vector<std::shared_ptr<Connection>> all;
    for (auto& [id, c] : conns) all.push_back(c);
    for (auto& c : all) driver.Close(c);
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpHeadCheck head_check)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(head_check))) {
}

HttpServer::~HttpServer() {
  Stop();
  impl_->pool.Shutdown();
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
  RaiseDescriptorLimit(impl_->options.max_connections);
  absl::StatusOr<int> fd = Listen(host, port);
  if (!fd.ok()) return fd.status();
  const int bound_port = BoundPort(*fd);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  impl_->listen_fd = *fd;
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
  ev.data.u64 = kListenKey;
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
  s.open_connections = impl_->counters.open;
  s.accepted = impl_->counters.accepted;
  s.refused = impl_->counters.refused;
  s.timed_out = impl_->counters.timed_out;
  s.requests = impl_->counters.requests;
  s.tls_handshake_failures = impl_->counters.tls_failures;
  return s;
}

bool HttpServer::tls() const {
  return !impl_->options.tls_cert_file.empty() && !impl_->options.tls_key_file.empty();
}

}  // namespace inac::http
