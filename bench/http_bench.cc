// The API's answer time while hostile connections are open: a normal request
// (connect, GET, read the whole answer, close) is timed while N idle keep-alive connections and N
// slowloris connections (one header line every 500 ms, never finished) are open, N = 16, 256 and
// 1,000. Two servers run the same trivial handler on 127.0.0.1: cpp-httplib's thread-per-connection
// server with 16 threads (what `inac serve` used before) and INAC's event-driven HttpServer with 16
// handler threads (http/http_server.h, what it uses now). A request that gets no answer within
// 1 s counts as a timeout (and as 1 s in the percentiles).
//
// Prints one JSON line per (server, N): {"bench":"http","server":...,"n":N,"requests":R,
// "p50_ms":..,"p99_ms":..,"max_ms":..,"timeouts":T}.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"

namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// One normal request; its time in ms (timeout_ms when it got no whole answer in time).
double TimedRequest(int port, int timeout_ms) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  int fd = Connect(port);
  if (fd < 0) return timeout_ms;
  const std::string req =
      "GET /api/v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string got;
  bool done = false;
  while (Clock::now() < deadline) {
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, std::max(1, left)) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      done = got.find("\r\n\r\n{\"status\":\"ok\"}") != std::string::npos;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!done) return timeout_ms;
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void Handle(const httplib::Request&, httplib::Response& res) {
  res.status = 200;
  res.set_content("{\"status\":\"ok\"}", "application/json");
}

struct Result {
  std::vector<double> ms;
  int timeouts = 0;
};

Result Measure(int port, int n, int requests, int timeout_ms) {
  std::vector<int> idle, slow;
  for (int i = 0; i < n; ++i) {
    int fd = Connect(port);
    if (fd >= 0) idle.push_back(fd);
    fd = Connect(port);
    if (fd >= 0) {
      const std::string start = "GET /api/v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      ::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
      slow.push_back(fd);
    }
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (int fd : slow) ::send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int i = 0; i < 50 && !stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server holds them all
  Result r;
  for (int i = 0; i < requests; ++i) {
    double ms = TimedRequest(port, timeout_ms);
    if (ms >= timeout_ms) r.timeouts++;
    r.ms.push_back(ms);
  }
  stop = true;
  trickle.join();
  for (int fd : idle) ::close(fd);
  for (int fd : slow) ::close(fd);
  return r;
}

void Print(const char* server, int n, Result r) {
  std::sort(r.ms.begin(), r.ms.end());
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(p * static_cast<double>(r.ms.size() - 1) + 0.5);
    return r.ms[std::min(i, r.ms.size() - 1)];
  };
  std::printf(
      "{\"bench\":\"http\",\"server\":\"%s\",\"n\":%d,\"requests\":%zu,\"p50_ms\":%.2f,"
      "\"p99_ms\":%.2f,\"max_ms\":%.2f,\"timeouts\":%d}\n",
      server, n, r.ms.size(), pct(0.5), pct(0.99), r.ms.back(), r.timeouts);
  std::fflush(stdout);
}

}  // namespace

int main() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  constexpr int kTimeoutMs = 1000;
  for (int n : {16, 256, 1000}) {
    // Before: cpp-httplib's server, 16 threads.
    {
      httplib::Server s;
      s.new_task_queue = [] { return new httplib::ThreadPool(16); };
      s.Get("/api/v1/healthz", Handle);
      int port = s.bind_to_any_port("127.0.0.1");
      std::thread t([&] { s.listen_after_bind(); });
      while (!s.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      Print("cpp-httplib", n, Measure(port, n, 20, kTimeoutMs));
      s.stop();
      t.join();
    }
    // After: the event-driven server.
    {
      inac::http::HttpServer s(
          {}, [](httplib::Request& req, httplib::Response& res) { Handle(req, res); });
      auto port = s.Bind("127.0.0.1", 0);
      if (!port.ok()) return 1;
      std::thread t([&] { s.Serve(); });
      Print("inac", n, Measure(*port, n, 500, kTimeoutMs));
      s.Stop();
      t.join();
    }
  }
  return 0;
}
