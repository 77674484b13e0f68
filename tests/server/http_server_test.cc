// The event-driven HTTP server (http/http_server.h) against hostile and unusual clients, over
// loopback with raw sockets: idle and slowloris connections do not stall other clients, header and
// body limits and timeouts hold, pipelined requests are answered in order, connection caps answer
// 503, and a second server cannot bind a taken address. No timed assertions: timeouts are set
// short and the tests wait for the outcome (bounded).
#include "http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace inac::server {
namespace {

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
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Reads until the peer closes, `until` appears `count` times, or 20 s pass.
std::string Read(int fd, const std::string& until = "", int count = 1) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!until.empty()) {
      int seen = 0;
      for (size_t at = got.find(until); at != std::string::npos; at = got.find(until, at + 1)) {
        ++seen;
      }
      if (seen >= count) break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// True when the peer closed the connection (within 20 s).
bool Closed(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(http::HttpServerOptions options = {}) {
    server_ = std::make_unique<http::HttpServer>(
        options, [this](httplib::Request& req, httplib::Response& res) {
          handled_++;
          if (req.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(200));
          res.status = 200;
          res.set_content(absl::StrCat(req.method, " ", req.path, " body=", req.body.size(),
                                       " q=", req.get_param_value("q")),
                          "text/plain");
        });
    auto port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    thread_ = std::thread([this] { server_->Serve(); });
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  int Open() {
    int fd = Connect(port_);
    EXPECT_GE(fd, 0);
    fds_.push_back(fd);
    return fd;
  }
  // One request on a new connection; the whole answer.
  std::string Get(const std::string& path) {
    int fd = Open();
    SendAll(fd, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    return Read(fd);
  }

  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> handled_{0};
  std::vector<int> fds_;
};

TEST_F(HttpServerTest, AnswersWithContentLengthAndKeepsTheConnection) {
  Start();
  int fd = Open();
  SendAll(fd, "GET /a?q=1%202 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string first = Read(fd, "q=1 2");
  EXPECT_TRUE(absl::StartsWith(first, "HTTP/1.1 200 OK\r\n")) << first;
  EXPECT_TRUE(absl::StrContains(first, "Connection: keep-alive")) << first;
  EXPECT_TRUE(absl::StrContains(first, "Content-Length: 19\r\n")) << first;
  SendAll(fd, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(Read(fd, "GET /b"), "GET /b body=0"));
}

TEST_F(HttpServerTest, IdleAndSlowlorisConnectionsDoNotStallOthers) {
  http::HttpServerOptions o;
  o.workers = 2;
  Start(o);
  // Far more idle and trickling connections than handler threads.
  for (int i = 0; i < 200; ++i) Open();
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    int fd = Open();
    SendAll(fd, "GET /trickle HTTP/1.1\r\nX-A: 1\r\n");
    slow.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    for (int fd : slow) SendAll(fd, "X-B: 2\r\n");
    std::string answer = Get("/normal");
    EXPECT_TRUE(absl::StrContains(answer, "GET /normal body=0")) << answer;
  }
}

TEST_F(HttpServerTest, HeadersThatDoNotArriveInTimeAre408AndClosed) {
  http::HttpServerOptions o;
  o.header_timeout_ms = 300;
  Start(o);
  int fd = Open();
  SendAll(fd, "GET /x HTTP/1.1\r\nHost: x\r\n");  // never finished
  std::string answer = Read(fd);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 408 ")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "\"code\":\"request_timeout\"")) << answer;
  EXPECT_TRUE(Closed(fd));
  EXPECT_GE(server_->stats().timed_out, 1);
}

TEST_F(HttpServerTest, OversizedHeadersAndRequestLinesAreRefused) {
  http::HttpServerOptions o;
  o.max_header_bytes = 4096;
  o.max_headers = 10;
  o.max_request_line_bytes = 1024;
  Start(o);
  std::string many = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) absl::StrAppend(&many, "X-", i, ": v\r\n");
  int fd = Open();
  SendAll(fd, many + "\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 431 "));
  // A header block that never ends is cut at the limit, not read on.
  fd = Open();
  SendAll(fd, "GET /x HTTP/1.1\r\nX-Big: " + std::string(8192, 'a'));
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 431 "));
  fd = Open();
  SendAll(fd, "GET /" + std::string(2000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 414 "));
  EXPECT_EQ(handled_, 0);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  int fd = Open();
  SendAll(fd,
          "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
          "POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
          "GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string all = Read(fd);
  const size_t one = all.find("GET /slow body=0");
  const size_t two = all.find("POST /two body=3");
  const size_t three = all.find("GET /three body=0");
  ASSERT_NE(one, std::string::npos) << all;
  ASSERT_NE(two, std::string::npos) << all;
  ASSERT_NE(three, std::string::npos) << all;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
}

TEST_F(HttpServerTest, ChunkedBodiesExpectContinueAndTheBodyLimit) {
  http::HttpServerOptions o;
  o.max_body_bytes = 100;
  Start(o);
  int fd = Open();
  SendAll(fd,
          "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(Read(fd, "body=11"), "POST /c body=11"));
  fd = Open();
  SendAll(fd, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd, "100 Continue\r\n\r\n"), "HTTP/1.1 100 Continue"));
  SendAll(fd, "abcd");
  EXPECT_TRUE(absl::StrContains(Read(fd, "body=4"), "POST /e body=4"));
  fd = Open();
  SendAll(fd, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 413 "));
  fd = Open();
  SendAll(fd,
          "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          "64\r\n" +
              std::string(100, 'a') + "\r\n1\r\na\r\n0\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 413 "));
  fd = Open();
  SendAll(fd, "POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 501 "));
  fd = Open();
  SendAll(fd, "POST /both HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 400 "));
}

TEST_F(HttpServerTest, MalformedRequestsAre400AndOtherVersions505) {
  Start();
  for (const std::string& bad :
       {std::string("GARBAGE\r\n\r\n"), std::string("GET x HTTP/1.1\r\n\r\n"),
        std::string("GET /x HTTP/1.1\r\n bad: fold\r\n\r\n"),
        std::string("GET /x HTTP/1.1\r\nNoColon\r\n\r\n")}) {
    int fd = Open();
    SendAll(fd, bad);
    EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 400 ")) << bad;
  }
  int fd = Open();
  SendAll(fd, "GET /x HTTP/2.0\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(Read(fd), "HTTP/1.1 505 "));
}

TEST_F(HttpServerTest, ConnectionsBeyondTheCapAre503) {
  http::HttpServerOptions o;
  o.max_connections_per_client = 5;
  Start(o);
  for (int i = 0; i < 5; ++i) Open();
  // Wait until the server holds all five (accept is asynchronous).
  for (int i = 0; i < 200 && server_->stats().open_connections < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int extra = Open();
  std::string answer = Read(extra);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 503 ")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "too many open connections")) << answer;
  EXPECT_GE(server_->stats().refused, 1);
  // Closing one makes room again.
  ::close(fds_[0]);
  fds_.erase(fds_.begin());
  for (int i = 0; i < 200 && server_->stats().open_connections > 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(absl::StrContains(Get("/again"), "GET /again body=0"));
}

TEST_F(HttpServerTest, IdleConnectionsAreClosedAfterTheIdleTimeout) {
  http::HttpServerOptions o;
  o.idle_timeout_ms = 200;
  Start(o);
  int fd = Open();
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StrContains(Read(fd, "body=0"), "GET /a"));
  EXPECT_TRUE(Closed(fd));
}

TEST_F(HttpServerTest, ASecondServerCannotBindATakenAddress) {
  Start();
  http::HttpServer second({}, [](httplib::Request&, httplib::Response&) {});
  auto bound = second.Bind("127.0.0.1", port_);
  ASSERT_FALSE(bound.ok());
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(bound.status().message(), "in use")) << bound.status();
}

TEST_F(HttpServerTest, StreamsAreChunkedAndEndWhenTheClientLeaves) {
  std::atomic<bool> released{false};
  server_ = std::make_unique<http::HttpServer>(
      http::HttpServerOptions{}, [&](httplib::Request&, httplib::Response& res) {
        res.status = 200;
        res.set_chunked_content_provider(
            "text/event-stream",
            [](size_t, httplib::DataSink& sink) {
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
              return sink.write("data: x\n\n", 9);
            },
            [&](bool) { released = true; });
      });
  auto port = server_->Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  port_ = *port;
  thread_ = std::thread([this] { server_->Serve(); });
  int fd = Connect(port_);
  SendAll(fd, "GET /s HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got = Read(fd, "data: x", 3);
  EXPECT_TRUE(absl::StrContains(got, "Transfer-Encoding: chunked")) << got;
  EXPECT_TRUE(absl::StrContains(got, "9\r\ndata: x\n\n\r\n")) << got;
  ::close(fd);
  for (int i = 0; i < 2000 && !released; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(released);  // the handler thread is free again
}

}  // namespace
}  // namespace inac::server
