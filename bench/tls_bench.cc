// What HTTPS costs the API server (docs/controller.md "TLS (HTTPS)"), on 127.0.0.1 with the
// production client (ApiClient) and INAC's HttpServer (16 handler threads, a trivial JSON handler),
// the same server with and without TLS (EC P-256 certificate from tests/fixtures/tls_certs.h):
//   - "new_connection": connect, (handshake,) GET, read, close — the CLI's pattern;
//   - "keep_alive": GETs on one kept-alive connection — the agents' and tests' pattern;
//   - "under_load": new-connection GETs while N idle kept-alive TLS clients and N TCP
//     connections that never start their handshake are open (N = 256, 1000).
// A request that fails counts as an error (and is left out of the percentiles).
//
// Prints one JSON line per scenario: {"bench":"tls","scenario":...,"tls":bool,"n":N,
// "requests":R,"p50_ms":..,"p99_ms":..,"max_ms":..,"errors":E}.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "http/http_server.h"
#include "northbound/api_client.h"
#include "tests/fixtures/temp_dir.h"
#include "tests/fixtures/tls_certs.h"

namespace {

using Clock = std::chrono::steady_clock;
using inac::northbound::ApiClient;
using inac::northbound::ApiClientOptions;

struct Figures {
  std::vector<double> ms;
  int errors = 0;
};

void Print(const char* scenario, bool tls, int n, Figures f) {
  std::sort(f.ms.begin(), f.ms.end());
  auto at = [&](double q) {
    if (f.ms.empty()) return 0.0;
    return f.ms[std::min(f.ms.size() - 1, static_cast<size_t>(q * f.ms.size()))];
  };
  std::printf(
      "{\"bench\":\"tls\",\"scenario\":\"%s\",\"tls\":%s,\"n\":%d,\"requests\":%zu,"
      "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":%d}\n",
      scenario, tls ? "true" : "false", n, f.ms.size(), at(0.5), at(0.99),
      f.ms.empty() ? 0.0 : f.ms.back(), f.errors);
  std::fflush(stdout);
}

std::unique_ptr<ApiClient> Client(const std::string& url, const std::string& ca, bool keep_alive) {
  ApiClientOptions options;
  options.server = url;
  options.ca_cert_file = ca;
  options.keep_alive = keep_alive;
  options.timeout_ms = 5000;
  auto client = ApiClient::Create(options);
  return client.ok() ? std::move(*client) : nullptr;
}

// `requests` GETs, each on a new client (new connection) unless `keep_alive`.
Figures Run(const std::string& url, const std::string& ca, bool keep_alive, int requests) {
  Figures f;
  auto shared = keep_alive ? Client(url, ca, true) : nullptr;
  for (int i = 0; i < requests; ++i) {
    const auto start = Clock::now();
    auto fresh = keep_alive ? nullptr : Client(url, ca, false);
    ApiClient* client = keep_alive ? shared.get() : fresh.get();
    auto reply = client->SendRaw({.target = "/healthz"});
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (reply.ok() && reply->http_status == 200) {
      f.ms.push_back(ms);
    } else {
      f.errors++;
    }
  }
  return f;
}

int ConnectTcp(int port) {
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

}  // namespace

int main() {
  const std::string dir = inac::fixtures::MakeTempDir("tls-bench");
  if (dir.empty()) return 1;
  auto files = inac::fixtures::WriteTlsTestFiles(dir);
  if (!files.ok()) {
    std::fprintf(stderr, "%s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  for (const bool tls : {false, true}) {
    inac::http::HttpServerOptions options;
    if (tls) {
      options.tls_cert_file = files->server_cert;
      options.tls_key_file = files->server_key;
    }
    options.header_timeout_ms = 60000;  // the silent connections stay for the whole run
    inac::http::HttpServer server(options, [](httplib::Request&, httplib::Response& res) {
      res.status = 200;
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    auto port = server.Bind("127.0.0.1", 0);
    if (!port.ok()) return 1;
    std::thread serving([&server] { server.Serve(); });
    const std::string url = absl::StrCat(tls ? "https://" : "http://", "127.0.0.1:", *port);
    const std::string ca = tls ? files->ca_cert : "";
    Run(url, ca, false, 50);  // warm-up
    Print("new_connection", tls, 0, Run(url, ca, false, 1000));
    Print("keep_alive", tls, 0, Run(url, ca, true, 5000));
    if (tls) {
      std::vector<std::unique_ptr<ApiClient>> idle;
      std::vector<int> silent;
      for (int n : {256, 1000}) {
        while (static_cast<int>(idle.size()) < n) {
          auto c = Client(url, ca, true);
          if (c == nullptr || !c->SendRaw({.target = "/healthz"}).ok()) break;
          idle.push_back(std::move(c));
        }
        while (static_cast<int>(silent.size()) < n) {
          const int fd = ConnectTcp(*port);
          if (fd < 0) break;
          silent.push_back(fd);
        }
        Print("under_load", tls, n, Run(url, ca, false, 200));
      }
      for (int fd : silent) ::close(fd);
    }
    server.Stop();
    serving.join();
  }
  std::system(absl::StrCat("rm -rf ", dir).c_str());
  return 0;
}
