#include "tests/ha/etcd_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/json.h"
#include "storage/etcd/etcd_client.h"

namespace inac::testing {

namespace {

// A port the kernel just gave a bound socket. The socket is closed before etcd binds the port,
// so the kernel may hand the same port out again: never returns one it returned before in this
// process (a cluster's peer URLs once got the same port twice and etcd refused to start).
int FreePort() {
  static std::set<int> given;
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      socklen_t len = sizeof(addr);
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port != 0 && given.insert(port).second) return port;
  }
  return 0;
}

std::string Tail(const std::string& path, size_t max_bytes = 1500) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace

std::string FindEtcdBinary() {
  if (const char* env = std::getenv("INAC_ETCD"); env && *env) {
    return access(env, X_OK) == 0 ? env : "";
  }
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

std::string FindEtcdctlBinary() {
  std::string etcd = FindEtcdBinary();
  if (!etcd.empty()) {
    std::string beside = (std::filesystem::path(etcd).parent_path() / "etcdctl").string();
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  for (const char* path : {"/usr/bin/etcdctl", "/usr/local/bin/etcdctl"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

EtcdCluster::~EtcdCluster() {
  for (size_t i = 0; i < members_.size(); ++i) Kill(static_cast<int>(i));
  if (!dir_.empty() && !std::getenv("INAC_KEEP_TEST_DIRS")) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status EtcdCluster::Start(int members, absl::Duration timeout) {
  binary_ = FindEtcdBinary();
  if (binary_.empty()) return absl::NotFoundError("no etcd binary (apt-get install etcd-server)");
  std::string pattern = (std::filesystem::temp_directory_path() / "inac-etcd-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  dir_ = pattern;
  for (int i = 0; i < members; ++i) {
    members_.push_back(Member{absl::StrCat("m", i), FreePort(), FreePort(), -1});
  }
  for (int i = 0; i < members; ++i) {
    if (auto s = Spawn(i, false); !s.ok()) return s;
  }
  return AwaitWritable(timeout);
}

absl::Status EtcdCluster::Spawn(int i, bool existing) {
  Member& m = members_[i];
  std::vector<std::string> cluster;
  for (const Member& other : members_) {
    cluster.push_back(absl::StrCat(other.name, "=http://127.0.0.1:", other.peer_port));
  }
  std::string client_url = absl::StrCat("http://127.0.0.1:", m.client_port);
  std::string peer_url = absl::StrCat("http://127.0.0.1:", m.peer_port);
  std::vector<std::string> args = {
      binary_,
      "--name",
      m.name,
      "--data-dir",
      absl::StrCat(dir_, "/", m.name),
      "--listen-client-urls",
      client_url,
      "--advertise-client-urls",
      client_url,
      "--listen-peer-urls",
      peer_url,
      "--initial-advertise-peer-urls",
      peer_url,
      "--initial-cluster",
      absl::StrJoin(cluster, ","),
      "--initial-cluster-state",
      existing ? "existing" : "new",
      "--initial-cluster-token",
      "inac-test",
      // A fast raft (loopback): leader loss noticed within ~0.5 s.
      "--heartbeat-interval",
      "50",
      "--election-timeout",
      "500",
      "--logger",
      "zap",
  };
  std::string log = absl::StrCat(dir_, "/", m.name, ".log");
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary_.c_str(), argv.data());
    _exit(127);
  }
  m.pid = pid;
  return absl::OkStatus();
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

absl::Status EtcdCluster::Restart(int i) {
  Kill(i);
  return Spawn(i, true);
}

absl::Status EtcdCluster::AwaitWritable(absl::Duration timeout) {
  auto client = storage::etcd::EtcdClient::Create({endpoint_list(), absl::Seconds(1)});
  if (!client.ok()) return client.status();
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  absl::Status last = absl::DeadlineExceededError("etcd never answered");
  while (std::chrono::steady_clock::now() < deadline) {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key("/inac-test/ping");
    put->set_value("1");
    auto r = (*client)->Txn(txn);
    if (r.ok()) return absl::OkStatus();
    last = r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd not writable: ", last.message(), "\n", Logs()));
}

int EtcdCluster::LeaderIndex() const {
  std::string etcdctl = FindEtcdctlBinary();
  if (etcdctl.empty()) return -1;
  std::string out = absl::StrCat(dir_, "/status.json");
  std::string cmd = absl::StrCat("ETCDCTL_API=3 '", etcdctl, "' --endpoints ", endpoints(),
                                 " endpoint status -w json > '", out, "' 2>/dev/null");
  (void)std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  core::Json status = core::Json::parse(text.str(), nullptr, false);
  if (!status.is_array()) return -1;
  for (const core::Json& e : status) {
    if (!e.is_object() || !e.contains("Status")) continue;
    const core::Json& s = e["Status"];
    uint64_t member = s.value("header", core::Json::object()).value("member_id", uint64_t{0});
    if (member == 0 || member != s.value("leader", uint64_t{0})) continue;
    std::string endpoint = e.value("Endpoint", "");
    for (size_t i = 0; i < members_.size(); ++i) {
      if (endpoint == absl::StrCat("http://127.0.0.1:", members_[i].client_port)) {
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

absl::Status EtcdCluster::SaveSnapshot(int i, const std::string& path) {
  std::string etcdctl = FindEtcdctlBinary();
  if (etcdctl.empty())
    return absl::FailedPreconditionError("no etcdctl (apt-get install etcd-client)");
  std::string cmd = absl::StrCat("ETCDCTL_API=3 '", etcdctl,
                                 "' --endpoints http://127.0.0.1:", members_[i].client_port,
                                 " snapshot save '", path, "' >> '", dir_, "/etcdctl.log' 2>&1");
  if (std::system(cmd.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("etcdctl snapshot save failed: ", Tail(dir_ + "/etcdctl.log")));
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::RestoreSnapshot(const std::string& path, absl::Duration timeout) {
  std::string etcdctl = FindEtcdctlBinary();
  if (etcdctl.empty())
    return absl::FailedPreconditionError("no etcdctl (apt-get install etcd-client)");
  for (size_t i = 0; i < members_.size(); ++i) Kill(static_cast<int>(i));
  std::vector<std::string> cluster;
  for (const Member& m : members_) {
    cluster.push_back(absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port));
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    std::string data = absl::StrCat(dir_, "/", m.name);
    std::error_code ignored;
    std::filesystem::remove_all(data, ignored);
    std::string cmd = absl::StrCat(
        "ETCDCTL_API=3 '", etcdctl, "' snapshot restore '", path, "' --name ", m.name,
        " --data-dir '", data, "' --initial-cluster ", absl::StrJoin(cluster, ","),
        " --initial-cluster-token inac-test --initial-advertise-peer-urls http://127.0.0.1:",
        m.peer_port, " >> '", dir_, "/etcdctl.log' 2>&1");
    if (std::system(cmd.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("etcdctl snapshot restore failed: ", Tail(dir_ + "/etcdctl.log")));
    }
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    if (auto s = Spawn(static_cast<int>(i), true); !s.ok()) return s;
  }
  return AwaitWritable(timeout);
}

std::vector<std::string> EtcdCluster::endpoint_list() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(absl::StrCat("http://127.0.0.1:", m.client_port));
  return out;
}

std::string EtcdCluster::endpoints() const { return absl::StrJoin(endpoint_list(), ","); }

std::string EtcdCluster::Logs() const {
  std::string out;
  for (const Member& m : members_) {
    absl::StrAppend(&out, "--- etcd ", m.name, ":\n",
                    Tail(absl::StrCat(dir_, "/", m.name, ".log")));
  }
  return out;
}

}  // namespace inac::testing
