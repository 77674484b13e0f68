#include "tests/server/server_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inac::server::testing {

using core::Json;

std::vector<northbound::ApiToken> DefaultTokens() {
  return {
      northbound::ApiToken{"admin", kAdminToken, northbound::Role::kAdmin, ""},
      northbound::ApiToken{"operator", kOperatorToken, northbound::Role::kOperator, ""},
      northbound::ApiToken{"viewer", kViewerToken, northbound::Role::kViewer, ""},
      northbound::ApiToken{"worker-vision", kWorkerToken, northbound::Role::kWorker, "vision"},
      northbound::ApiToken{"worker-nlp", kOtherWorkerToken, northbound::Role::kWorker, "nlp"},
  };
}

// A handle the controller owns; the fake itself stays with the fabric.
class SharedFakeClient : public southbound::SwitchClient {
 public:
  explicit SharedFakeClient(std::shared_ptr<southbound::FakeSwitchClient> fake)
      : fake_(std::move(fake)) {}
  const std::string& switch_id() const override { return fake_->switch_id(); }
  absl::Status Connect() override { return fake_->Connect(); }
  bool IsConnected() const override { return fake_->IsConnected(); }
  bool IsPrimary() const override { return fake_->IsPrimary(); }
  absl::StatusOr<bool> EnsurePipeline() override { return fake_->EnsurePipeline(); }
  absl::StatusOr<southbound::ReconcileStats> Reconcile(const core::SwitchIntent& intent) override {
    return fake_->Reconcile(intent);
  }
  absl::StatusOr<std::vector<southbound::AggregationCounters>> ReadCounters(
      const core::SwitchIntent& intent) override {
    return fake_->ReadCounters(intent);
  }
  void Disconnect() override { fake_->Disconnect(); }

 private:
  std::shared_ptr<southbound::FakeSwitchClient> fake_;
};

SwitchClientFactory FakeFabric::Factory() {
  return [this](const core::Switch& sw, southbound::ElectionId election_id)
             -> absl::StatusOr<std::unique_ptr<southbound::SwitchClient>> {
    std::lock_guard<std::mutex> lock(mu_);
    auto& fake = fakes_[sw.id];
    if (!fake) fake = std::make_shared<southbound::FakeSwitchClient>(sw.id);
    elections_[sw.id] = election_id.low;
    return std::unique_ptr<southbound::SwitchClient>(new SharedFakeClient(fake));
  };
}

std::shared_ptr<southbound::FakeSwitchClient> FakeFabric::Get(const std::string& switch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = fakes_.find(switch_id);
  return it == fakes_.end() ? nullptr : it->second;
}

uint64_t FakeFabric::election_id(const std::string& switch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = elections_.find(switch_id);
  return it == elections_.end() ? 0 : it->second;
}

std::vector<std::string> FakeFabric::ids() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, fake] : fakes_) out.push_back(id);
  return out;
}

std::string Reply::code() const {
  if (json.is_object() && json.contains("error") && json["error"].is_object() &&
      json["error"].contains("code") && json["error"]["code"].is_string()) {
    return json["error"]["code"].get<std::string>();
  }
  return "";
}

std::string Reply::field() const {
  if (json.is_object() && json.contains("error") && json["error"].is_object() &&
      json["error"].contains("field") && json["error"]["field"].is_string()) {
    return json["error"]["field"].get<std::string>();
  }
  return "";
}

std::string Reply::message() const {
  if (json.is_object() && json.contains("error") && json["error"].is_object() &&
      json["error"].contains("message") && json["error"]["message"].is_string()) {
    return json["error"]["message"].get<std::string>();
  }
  return "";
}

std::ostream& operator<<(std::ostream& os, const Reply& reply) {
  os << "HTTP " << reply.status;
  if (!reply.error.empty()) os << " (transport: " << reply.error << ")";
  return os << " " << reply.body.substr(0, 600);
}

TestServer::TestServer(TestServerOptions options) : options_(std::move(options)) {
  db_path_ = dir_.File("inac.db");
  if (options_.controller.debounce_ms == ControllerOptions{}.debounce_ms) {
    options_.controller.debounce_ms = 0;
  }
  if (options_.controller.timer_ms == ControllerOptions{}.timer_ms) {
    options_.controller.timer_ms = 3600 * 1000;  // passes only when woken (Sync, commands)
  }
}

TestServer::~TestServer() { Stop(); }

absl::Status TestServer::Start() {
  auto storage = storage::SqliteStorage::Open(db_path_);
  if (!storage.ok()) return storage.status();
  storage_ = std::move(*storage);
  SwitchClientFactory factory = options_.factory ? options_.factory : fabric_.Factory();
  controller_ =
      std::make_unique<Controller>(storage_.get(), factory, SystemClockMs, options_.controller);
  if (auto s = controller_->Start(); !s.ok()) return s;
  northbound::HttpApiOptions api_options;
  api_options.tokens = options_.tokens;
  api_options.threads = 8;
  api_ = std::make_unique<northbound::HttpApi>(controller_->services(), api_options);
  auto port = api_->Bind("127.0.0.1", 0);
  if (!port.ok()) return port.status();
  port_ = *port;
  serve_ = std::thread([api = api_.get()] { api->Serve(); });
  return absl::OkStatus();
}

void TestServer::Stop() {
  if (api_) api_->Stop();
  if (serve_.joinable()) serve_.join();
  api_.reset();
  if (controller_) controller_->Stop();
  controller_.reset();
  storage_.reset();
}

absl::Status TestServer::Restart() {
  Stop();
  return Start();
}

std::unique_ptr<northbound::ApiClient> TestServer::Client(const std::string& token) {
  northbound::ApiClientOptions options;
  options.server = absl::StrCat("http://127.0.0.1:", port_);
  options.token = token;
  options.timeout_ms = 60000;
  auto client = northbound::ApiClient::Create(options);
  if (!client.ok()) std::abort();  // the URL is always valid
  return *std::move(client);
}

Reply TestServer::Call(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& token,
                       const std::multimap<std::string, std::string>& headers) {
  Reply reply;
  northbound::RawRequest request;
  request.method = method;
  request.target = path;
  request.body = body;
  request.headers.assign(headers.begin(), headers.end());
  auto raw = Client(token)->SendRaw(request);
  if (!raw.ok()) {
    reply.error = std::string(raw.status().message());
    return reply;
  }
  reply.status = raw->http_status;
  reply.headers = std::move(raw->headers);
  reply.body = std::move(raw->body);
  reply.json = Json::parse(reply.body, nullptr, false);
  return reply;
}

Reply ParseRawResponse(const std::string& bytes) {
  Reply reply;
  auto end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) {
    reply.error = bytes.empty() ? "connection closed without an answer" : "not an HTTP answer";
    reply.body = bytes;
    return reply;
  }
  std::string head = bytes.substr(0, end);
  reply.body = bytes.substr(end + 4);
  size_t line_end = head.find("\r\n");
  std::string status_line = head.substr(0, line_end);
  auto sp = status_line.find(' ');
  if (sp != std::string::npos) {
    (void)absl::SimpleAtoi(status_line.substr(sp + 1, 3), &reply.status);
  }
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    std::string line = head.substr(pos, next - pos);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      reply.headers.emplace(line.substr(0, colon),
                            std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
    }
    pos = next + 2;
  }
  reply.json = Json::parse(reply.body, nullptr, false);
  return reply;
}

Reply TestServer::Raw(const std::string& bytes, bool half_close) {
  Reply reply;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    reply.error = "socket";
    return reply;
  }
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    reply.error = "connect";
    return reply;
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading everything
    sent += static_cast<size_t>(n);
  }
  // httplib drops a request whose connection the client half-closed, so by default the request
  // asks for "Connection: close" and the answer is read until the server closes.
  if (half_close) shutdown(fd, SHUT_WR);
  std::string in;
  char buf[65536];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return ParseRawResponse(in);
}

absl::Status TestServer::Sync() { return controller_->Sync(60000); }

int TestServer::PutTopology(const core::Topology& topology) {
  return Call("PUT", "/api/v1/topology", core::TopologyToJson(topology).dump()).status;
}

int64_t TestServer::Submit(const Json& spec) {
  Reply r = Call("POST", "/api/v1/jobs", spec.dump());
  if (r.status != 201 || !r.json.is_object()) return -1;
  return r.json["id"].get<int64_t>();
}

std::string TestServer::JobState(int64_t id) {
  Reply r = Get(absl::StrCat("/api/v1/jobs/", id));
  if (r.status != 200 || !r.json.is_object()) return absl::StrCat("HTTP ", r.status);
  return r.json["state"].get<std::string>();
}

}  // namespace inac::server::testing
