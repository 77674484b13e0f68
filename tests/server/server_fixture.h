// Test harness for the server layer: a Controller over a temp-file SQLite database, switches that
// are FakeSwitchClients shared with the test (or emulated P4Runtime switches), and the REST API
// served on 127.0.0.1 port 0 by a thread of the test process. Requests go through a real TCP
// connection: the production client (northbound/api_client.h), or raw bytes on a socket for
// requests no client would send (TestServer::Raw). The sample fabric and jobs are the shared ones
// (tests/fixtures/).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/json.h"
#include "core/topology.h"
#include "northbound/api_client.h"
#include "northbound/http_api.h"
#include "server/controller.h"
#include "southbound/testing/fake_switch_client.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/fixtures/temp_dir.h"

namespace inac::server::testing {

// Tokens the default test server accepts.
inline constexpr char kAdminToken[] = "admin-token-0123456789";
inline constexpr char kOperatorToken[] = "operator-token-0123456789";
inline constexpr char kViewerToken[] = "viewer-token-0123456789";
inline constexpr char kWorkerToken[] = "worker-vision-0123456789";    // tenant "vision"
inline constexpr char kOtherWorkerToken[] = "worker-nlp-0123456789";  // tenant "nlp"
std::vector<northbound::ApiToken> DefaultTokens();

using fixtures::TempDir;  // tests/fixtures/temp_dir.h

// The switches of a test: one FakeSwitchClient per switch id, created on the controller's first
// request and kept across controller restarts (a restarted controller reaches the same switches).
class FakeFabric {
 public:
  SwitchClientFactory Factory();
  // The fake of `switch_id`, or null if the controller never asked for it.
  std::shared_ptr<southbound::FakeSwitchClient> Get(const std::string& switch_id);
  // The election id of the newest client made for `switch_id` (0 if none).
  uint64_t election_id(const std::string& switch_id);
  std::vector<std::string> ids();

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<southbound::FakeSwitchClient>> fakes_;
  std::map<std::string, uint64_t> elections_;
};

// The server tests' fabric and job (tests/fixtures/): leaf-spine lf0, lf1 (INA), sp0, sp1, hosts
// h0_0, h0_1, h1_0, h1_1; the job's workers h0_0 and h0_1, PS h1_0, ResNet50.
using fixtures::SmallLeafSpine;
using fixtures::SmallLeafSpineJob;

// One answer: an ApiClient::SendRaw reply (or a raw-socket one), its body parsed as core::Json
// (key order as the server wrote it).
struct Reply {
  int status = 0;     // 0: no HTTP answer (transport error, see `error`)
  std::string error;  // transport error
  std::string body;
  core::Json json;  // parsed body; discarded value when not JSON
  std::multimap<std::string, std::string> headers;
  // error.code / error.field of an error body ("" when absent).
  std::string code() const;
  std::string field() const;
  std::string message() const;
};
std::ostream& operator<<(std::ostream& os, const Reply& reply);

struct TestServerOptions {
  std::vector<northbound::ApiToken> tokens = DefaultTokens();
  ControllerOptions controller;  // debounce 0, timer 1 h unless set
  SwitchClientFactory factory;   // null: the server's FakeFabric
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions options = {});
  ~TestServer();

  // Opens the database (in its own temp dir), starts the controller and the API.
  absl::Status Start();
  // Stops the API and the controller and closes the database (the fabric is kept).
  void Stop();
  // Stop() then Start() over the same database file and fabric.
  absl::Status Restart();

  // One request on a fresh connection, through ApiClient::SendRaw: `path` as sent (e.g.
  // "/api/v1/jobs" or "/metrics"), `body` as it is (Content-Type application/json unless
  // `headers` names one). `token` empty: no Authorization header.
  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             const std::string& token = kAdminToken,
             const std::multimap<std::string, std::string>& headers = {});
  // A client of this server's API with `token` (empty: no Authorization header) and a 60 s
  // timeout, for what Call does not cover (ApiClient::Stream). Not thread-safe: one per thread.
  std::unique_ptr<northbound::ApiClient> Client(const std::string& token = kAdminToken);
  Reply Get(const std::string& path, const std::string& token = kAdminToken) {
    return Call("GET", path, "", token);
  }
  // Sends `bytes` as they are and returns the parsed answer (status 0 if none). The bytes should
  // ask for "Connection: close". `half_close`: shut the sending side down after them (the server
  // then sees the end of the stream).
  Reply Raw(const std::string& bytes, bool half_close = false);

  // Blocks until the loop completed a whole pass started after this call (bounded: 60 s).
  absl::Status Sync();
  // PUT /topology (admin); returns the HTTP status.
  int PutTopology(const core::Topology& topology);
  // POST /jobs (admin); returns the job id or -1.
  int64_t Submit(const core::Json& spec);
  std::string JobState(int64_t id);

  int port() const { return port_; }
  Controller& controller() { return *controller_; }
  core::Storage& storage() { return *storage_; }
  FakeFabric& fabric() { return fabric_; }
  const std::string& db_path() const { return db_path_; }

 private:
  TestServerOptions options_;
  TempDir dir_;
  std::string db_path_;
  FakeFabric fabric_;
  std::unique_ptr<storage::SqliteStorage> storage_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<northbound::HttpApi> api_;
  std::thread serve_;
  int port_ = 0;
};

// Parses `reply` bytes of an HTTP/1.1 response (status line, headers, body; chunked bodies are
// left as they are).
Reply ParseRawResponse(const std::string& bytes);

}  // namespace inac::server::testing
