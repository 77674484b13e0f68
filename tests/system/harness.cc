#include "tests/system/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/json.h"
#include "southbound/entity_codec.h"
#include "southbound/p4info_index.h"

namespace inac::systest {

const char* InacBinary() {
#ifdef INAC_BINARY
  return INAC_BINARY;
#else
  return "";
#endif
}

CliRun RunInac(const std::string& args, const std::string& dir) {
  std::string err_path = dir + "/stderr.txt";
  std::string cmd = std::string(InacBinary()) + " " + args + " 2>" + err_path;
  CliRun run;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) run.out.append(buf, n);
  int status = pclose(p);
  run.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  run.out += "--stderr--\n" + std::string(std::istreambuf_iterator<char>(err), {});
  return run;
}

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// ------------------------------------------------------------------------------------------------
// ChildProcess

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& args, const std::string& log_path) {
  return StartProgram(InacBinary(), args, log_path);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::StartProgram(
    const std::string& program, const std::vector<std::string>& args, const std::string& log_path) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->log_path_ = log_path;
  child->log_fd_ = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (child->log_fd_ < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  // Everything the child needs is prepared before fork (the parent is multi-threaded).
  std::vector<std::string> owned;
  owned.push_back(program);
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Dies with the test (a crashed test must not leave switches or controllers behind).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(fds[1], STDOUT_FILENO);
    dup2(child->log_fd_, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  child->pid_ = pid;
  int read_fd = fds[0];
  child->drain_ = std::thread([c = child.get(), read_fd] { c->Drain(read_fd); });
  return child;
}

void ChildProcess::Drain(int fd) {
  std::string line;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t off = 0;
    while (off < n) {
      ssize_t w = write(log_fd_, buf + off, n - off);
      if (w <= 0) break;
      off += w;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      const std::string prefix = "listening on ";
      if (line.rfind(prefix, 0) == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!listening_) listening_ = line.substr(prefix.size());
        cv_.notify_all();
      }
      line.clear();
    }
  }
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (drain_.joinable()) drain_.join();
  if (log_fd_ >= 0) close(log_fd_);
}

absl::StatusOr<std::string> ChildProcess::AwaitListening(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                           [this] { return listening_.has_value() || eof_; });
  if (listening_) return *listening_;
  if (!done) {
    return absl::DeadlineExceededError(absl::StrCat("no `listening on` line within ",
                                                    absl::FormatDuration(timeout), "; log:\n",
                                                    LogTail(log_path_)));
  }
  return absl::UnavailableError(
      absl::StrCat("process exited before listening; log:\n", LogTail(log_path_)));
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

int ChildProcess::Wait(absl::Duration timeout, int signal) {
  if (reaped_) return exit_;
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  int status = 0;
  bool signalled = false;
  while (true) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0) {
      status = 0;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (signal != SIGKILL && !signalled) {
        kill(pid_, signal);  // its chance to report; SIGKILL 10 s later
        signalled = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        continue;
      }
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reaped_ = true;
  exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
  if (drain_.joinable()) drain_.join();
  return exit_;
}

bool ChildProcess::Exited() {
  if (reaped_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return false;
  if (r == pid_) {
    exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
  }
  reaped_ = true;
  if (drain_.joinable()) drain_.join();
  return true;
}

std::string LogTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

// ------------------------------------------------------------------------------------------------
// Fabric and controller

absl::Status EmulatedFabric::Start(core::Topology* topology, const std::string& dir) {
  for (size_t i = 0; i < topology->switches.size(); ++i) {
    const std::string& id = topology->switches[i].id;
    Member m;
    m.device_id = i + 1;
    m.log = absl::StrCat(dir, "/switch-", id, ".log");
    auto p = ChildProcess::Start(
        {"switch", "--listen", "127.0.0.1:0", "--device-id", std::to_string(m.device_id)}, m.log);
    if (!p.ok()) return p.status();
    m.process = std::move(*p);
    members_[id] = std::move(m);
  }
  for (core::Switch& sw : topology->switches) {
    Member& m = members_[sw.id];
    auto address = m.process->AwaitListening(absl::Seconds(30));
    if (!address.ok()) return address.status();
    m.address = *address;
    sw.p4runtime = core::P4RuntimeEndpoint{m.address, m.device_id};
  }
  return absl::OkStatus();
}

absl::Status EmulatedFabric::StartShared(core::Topology* topology, const std::string& dir) {
  const std::string log = absl::StrCat(dir, "/switches.log");
  auto p = ChildProcess::Start({"switch", "--listen", "127.0.0.1:0", "--device-id", "1",
                                "--devices", std::to_string(topology->switches.size())},
                               log);
  if (!p.ok()) return p.status();
  shared_ = std::move(*p);
  auto address = shared_->AwaitListening(absl::Seconds(30));
  if (!address.ok()) return address.status();
  for (size_t i = 0; i < topology->switches.size(); ++i) {
    topology->switches[i].p4runtime = core::P4RuntimeEndpoint{*address, i + 1};
  }
  return absl::OkStatus();
}

absl::Status EmulatedFabric::KillAndRestart(const std::string& switch_id) {
  auto it = members_.find(switch_id);
  if (it == members_.end()) return absl::NotFoundError(switch_id);
  Member& m = it->second;
  m.process->Signal(SIGKILL);
  m.process->Wait();
  m.process.reset();
  // The port is free as soon as the process is gone (gRPC listens with SO_REUSEADDR); retry a
  // few times in case the kernel is slow to release it.
  absl::Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto p = ChildProcess::Start(
        {"switch", "--listen", m.address, "--device-id", std::to_string(m.device_id)}, m.log);
    if (!p.ok()) return p.status();
    auto address = (*p)->AwaitListening(absl::Seconds(30));
    if (address.ok()) {
      m.process = std::move(*p);
      return absl::OkStatus();
    }
    last = address.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return last;
}

ChildProcess* EmulatedFabric::process(const std::string& switch_id) {
  auto it = members_.find(switch_id);
  return it == members_.end() ? nullptr : it->second.process.get();
}

absl::Status ControllerProcess::Start(const std::string& dir, const std::string& name,
                                      const std::string& db, const Json& config,
                                      const std::vector<std::string>& extra) {
  std::string config_path = absl::StrCat(dir, "/", name, ".json");
  {
    std::ofstream out(config_path);
    out << config.dump(2);
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", config_path));
  }
  std::vector<std::string> args = {"serve",    "--config",    config_path,   "--db", db,
                                   "--listen", "127.0.0.1:0", "--log-level", "debug"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = ChildProcess::Start(args, absl::StrCat(dir, "/", name, ".log"));
  if (!p.ok()) return p.status();
  process_ = std::move(*p);
  auto address = process_->AwaitListening(absl::Seconds(60));
  if (!address.ok()) return address.status();
  host_port_ = *address;
  base_url_ = absl::StrCat("http://", host_port_);
  return absl::OkStatus();
}

void ControllerProcess::Kill9() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait();
}

int ControllerProcess::Terminate() {
  if (!process_) return -1;
  process_->Signal(SIGTERM);
  return process_->Wait(absl::Seconds(30));
}

// ------------------------------------------------------------------------------------------------
// REST

Rest::Rest(const std::string& host_port, absl::Duration timeout) {
  northbound::ApiClientOptions options;
  options.server = absl::StrCat("http://", host_port);
  options.timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  options.keep_alive = true;
  auto client = northbound::ApiClient::Create(options);
  if (client.ok()) client_ = *std::move(client);
}

Rest::~Rest() = default;

Response Rest::Send(const std::string& method, const std::string& path, const std::string& body,
                    const std::map<std::string, std::string>& headers) {
  Response r;
  if (!client_) return r;
  northbound::RawRequest request;
  request.method = method;
  request.target = "/api/v1" + path;
  request.body = body;
  request.headers.assign(headers.begin(), headers.end());
  auto reply = client_->SendRaw(request);
  if (!reply.ok()) return r;
  r.status = reply->http_status;
  r.text = std::move(reply->body);
  if (!reply->json.is_discarded()) r.body = std::move(reply->json);
  return r;
}

Response Rest::Get(const std::string& path) { return Send("GET", path, ""); }

Response Rest::Post(const std::string& path, const Json& body,
                    const std::map<std::string, std::string>& headers) {
  return Send("POST", path, body.dump(), headers);
}

Response Rest::Put(const std::string& path, const Json& body) {
  return Send("PUT", path, body.dump());
}

Response Rest::Patch(const std::string& path, const Json& body) {
  return Send("PATCH", path, body.dump());
}

Response Rest::Delete(const std::string& path) { return Send("DELETE", path, ""); }

int64_t SubmitAndAwaitRunning(Rest& rest, const Json& job, std::string* error) {
  Response r = rest.Post("/jobs", job);
  if (r.status != 201) {
    *error = absl::StrCat("POST /jobs: ", r.status, " ", r.text);
    return 0;
  }
  const int64_t id = r.body["id"].get<int64_t>();
  for (int i = 0; i < 300; ++i) {
    Response g = rest.Get(absl::StrCat("/jobs/", id));
    if (g.status == 200 && g.body["state"] == "running") return id;
    absl::SleepFor(absl::Milliseconds(100));
  }
  *error = absl::StrCat("job ", id, " not running within 30 s");
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Read-back

SwitchReader::SwitchReader() {
  auto index = southbound::P4InfoIndex::EmbeddedIna();
  if (index.ok()) {
    auto t = southbound::IntentTranslator::Create(*index);
    if (t.ok()) translator_.emplace(std::move(*t));
  }
}

absl::StatusOr<SwitchContent> SwitchReader::Read(const std::string& address, uint64_t device_id) {
  if (!translator_) return absl::InternalError("no translator for the embedded P4Info");
  southbound::SessionOptions options;
  options.address = address;
  options.device_id = device_id;
  options.rpc_timeout = absl::Seconds(10);
  southbound::SwitchSession session(options);
  auto read = session.Read(translator_->OwnedStateFilters());
  if (!read.ok()) return read.status();
  SwitchContent content;
  for (p4::v1::Entity& e : *read) {
    if (!translator_->IsOwned(e)) continue;
    auto s = southbound::CanonicalizeInPlace(e);
    if (!s.ok()) return s;
    std::string key = southbound::EntityKey(e);
    if (!content.by_key.emplace(key, southbound::EntityFingerprint(e)).second) {
      content.duplicates++;
    }
    content.entities.push_back(e);
  }
  return content;
}

absl::StatusOr<SwitchContent> SwitchReader::Expected(const core::SwitchIntent& intent) {
  if (!translator_) return absl::InternalError("no translator for the embedded P4Info");
  auto entities = translator_->Translate(intent);
  if (!entities.ok()) return entities.status();
  SwitchContent content;
  for (const p4::v1::Entity& e : *entities) {
    if (!content.by_key.emplace(southbound::EntityKey(e), southbound::EntityFingerprint(e))
             .second) {
      content.duplicates++;
    }
    content.entities.push_back(e);
  }
  return content;
}

std::string SwitchReader::Diff(const SwitchContent& expected, const SwitchContent& actual) {
  int64_t missing = 0, extra = 0, different = 0;
  for (const auto& [key, fp] : expected.by_key) {
    auto it = actual.by_key.find(key);
    if (it == actual.by_key.end()) {
      missing++;
    } else if (it->second != fp) {
      different++;
    }
  }
  for (const auto& [key, fp] : actual.by_key) extra += expected.by_key.count(key) ? 0 : 1;
  if (missing == 0 && extra == 0 && different == 0 && actual.duplicates == 0 &&
      actual.entities.size() == expected.entities.size()) {
    return "";
  }
  return absl::StrCat("expected ", expected.entities.size(), " entities, read ",
                      actual.entities.size(), ": ", missing, " missing, ", extra, " extra, ",
                      different, " different, ", actual.duplicates, " duplicate keys");
}

std::map<std::string, core::SwitchIntent> IntentsBySwitch(const core::Topology& topology,
                                                          const core::Plan& plan) {
  std::map<std::string, core::SwitchIntent> out;
  for (const core::Switch& sw : topology.switches) {
    out[sw.id].switch_id = sw.id;
    out[sw.id].version = plan.version;
  }
  for (core::SwitchIntent& intent : core::DeriveSwitchIntents(topology, plan)) {
    out[intent.switch_id] = std::move(intent);
  }
  return out;
}

std::string CompareFabric(const core::Topology& topology,
                          const std::map<std::string, core::SwitchIntent>& intents,
                          SwitchReader& reader) {
  std::string problems;
  for (const core::Switch& sw : topology.switches) {
    if (!sw.p4runtime) continue;
    core::SwitchIntent empty;
    empty.switch_id = sw.id;
    auto it = intents.find(sw.id);
    auto expected = reader.Expected(it == intents.end() ? empty : it->second);
    if (!expected.ok()) {
      absl::StrAppend(&problems, sw.id, ": intent: ", expected.status().ToString(), "\n");
      continue;
    }
    auto actual = reader.Read(sw.p4runtime->address, sw.p4runtime->device_id);
    if (!actual.ok()) {
      absl::StrAppend(&problems, sw.id, ": read: ", actual.status().ToString(), "\n");
      continue;
    }
    std::string diff = SwitchReader::Diff(*expected, *actual);
    if (!diff.empty()) absl::StrAppend(&problems, sw.id, ": ", diff, "\n");
  }
  return problems;
}

std::optional<ControllerView> FetchView(Rest& rest) {
  Response topo = rest.Get("/topology");
  Response plan = rest.Get("/plan");
  if (topo.status != 200 || plan.status != 200) return std::nullopt;
  std::vector<core::Problem> problems;
  ControllerView view;
  view.topology = core::TopologyFromJson(topo.body, &problems);
  if (!problems.empty()) return std::nullopt;
  plan.body.erase("created_ms");
  auto p = core::PlanFromJson(plan.body);
  if (!p.ok()) return std::nullopt;
  view.plan = std::move(*p);
  return view;
}

absl::StatusOr<ControllerView> AwaitConverged(Rest& rest, SwitchReader& reader,
                                              absl::Duration timeout, int jobs) {
  auto deadline = absl::Now() + timeout;
  std::string last = "no plan yet";
  while (absl::Now() < deadline) {
    auto view = FetchView(rest);
    if (view && jobs >= 0 && view->plan.jobs.size() != static_cast<size_t>(jobs)) {
      last = absl::StrCat("plan ", view->plan.version, " holds ", view->plan.jobs.size(),
                          " jobs, waiting for ", jobs);
      view.reset();
    }
    // An admission plan is provisional: its background re-plan follows (docs/controller.md
    // "Incremental planning"); converged means the refined plan is in force.
    if (view && absl::StartsWith(view->plan.fingerprint, "admitted:")) {
      last =
          absl::StrCat("plan ", view->plan.version, " is an admission plan awaiting its re-plan");
      view.reset();
    }
    if (view) {
      Response switches = rest.Get("/switches");
      bool in_sync = switches.status == 200;
      if (in_sync) {
        for (const Json& s : switches.body["switches"]) {
          if (!s.value("managed", false)) continue;
          if (s.value("applied_version", int64_t{0}) != view->plan.version ||
              !s.value("last_error", std::string()).empty()) {
            in_sync = false;
            last = absl::StrCat("switch ", s.value("id", std::string()), " reports applied ",
                                s.value("applied_version", int64_t{0}), " of plan ",
                                view->plan.version, " error \"",
                                s.value("last_error", std::string()), "\"");
            break;
          }
        }
      }
      if (in_sync) {
        std::string diff =
            CompareFabric(view->topology, IntentsBySwitch(view->topology, view->plan), reader);
        // The plan may have moved on while reading: only a stable plan counts.
        auto again = FetchView(rest);
        if (diff.empty() && again && again->plan.version == view->plan.version) return *view;
        last = diff.empty() ? "plan changed while reading" : diff;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("not converged: ", last));
}

std::string CompareFabricParallel(const core::Topology& topology,
                                  const std::map<std::string, core::SwitchIntent>& intents,
                                  int threads) {
  std::vector<const core::Switch*> managed;
  for (const core::Switch& sw : topology.switches) {
    if (sw.p4runtime) managed.push_back(&sw);
  }
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::string problems;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      SwitchReader reader;
      for (size_t i = next++; i < managed.size(); i = next++) {
        const core::Switch& sw = *managed[i];
        core::SwitchIntent empty;
        empty.switch_id = sw.id;
        auto it = intents.find(sw.id);
        std::string problem;
        auto expected = reader.Expected(it == intents.end() ? empty : it->second);
        if (!expected.ok()) {
          problem = absl::StrCat(sw.id, ": intent: ", expected.status().ToString(), "\n");
        } else if (auto actual = reader.Read(sw.p4runtime->address, sw.p4runtime->device_id);
                   !actual.ok()) {
          problem = absl::StrCat(sw.id, ": read: ", actual.status().ToString(), "\n");
        } else if (std::string diff = SwitchReader::Diff(*expected, *actual); !diff.empty()) {
          problem = absl::StrCat(sw.id, ": ", diff, "\n");
        }
        if (!problem.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          problems += problem;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return problems;
}

int64_t UnixMs() { return absl::ToUnixMillis(absl::Now()); }

std::optional<FleetReport> ReportFleet(Rest& rest, int64_t since_unix_ms) {
  Response plan = rest.Get("/plan");
  if (plan.status != 200 || !plan.body.is_object()) return std::nullopt;
  Response switches = rest.Get("/switches");
  if (switches.status != 200 || !switches.body.is_object()) return std::nullopt;
  FleetReport r;
  r.plan_version = plan.body.value("version", int64_t{0});
  r.plan_jobs =
      plan.body.contains("jobs") && plan.body["jobs"].is_array() ? plan.body["jobs"].size() : 0;
  r.admission_plan = absl::StartsWith(plan.body.value("fingerprint", std::string()), "admitted:");
  r.solve_ms = plan.body.value("solve_ms", 0.0);
  for (const Json& s : switches.body["switches"]) {
    if (!s.value("managed", false)) continue;
    r.managed++;
    const std::string error = s.value("last_error", std::string());
    const int64_t applied = s.value("applied_version", int64_t{0});
    const int64_t contact = s.value("last_contact_ms", int64_t{0});
    if (applied == r.plan_version && error.empty() && contact >= since_unix_ms &&
        s.value("primary", false)) {
      r.reconciled++;
    } else if (r.first_lagging.empty()) {
      r.first_lagging =
          absl::StrCat(s.value("id", std::string()), " applied ", applied, " of plan ",
                       r.plan_version, ", contact ", contact, " (since ", since_unix_ms,
                       "), primary ", s.value("primary", false), ", error \"", error, "\"");
    }
  }
  return r;
}

absl::StatusOr<FleetReport> AwaitFleetReconciled(Rest& rest, int64_t since_unix_ms,
                                                 absl::Duration timeout, int jobs,
                                                 absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    if (auto r = ReportFleet(rest, since_unix_ms)) {
      if (r->admission_plan) {
        last = absl::StrCat("plan ", r->plan_version, " is an admission plan");
      } else if (jobs >= 0 && r->plan_jobs != static_cast<size_t>(jobs)) {
        last = absl::StrCat("plan ", r->plan_version, " holds ", r->plan_jobs, " jobs of ", jobs);
      } else if (r->managed > 0 && r->reconciled == r->managed) {
        return *r;
      } else {
        last = absl::StrCat(r->reconciled, " of ", r->managed, " switches reconciled; ",
                            r->first_lagging);
      }
    }
    absl::SleepFor(poll);
  }
  return absl::DeadlineExceededError(absl::StrCat("fleet not reconciled: ", last));
}

std::vector<Json> AllJobs(Rest& rest) {
  std::vector<Json> jobs;
  int64_t after = 0;
  for (int page = 0; page < 100; ++page) {
    Response r = rest.Get(absl::StrCat("/jobs?limit=1000&after=", after));
    if (r.status != 200) break;
    for (const Json& j : r.body["jobs"]) jobs.push_back(j);
    if (r.body["next_after"].is_null()) break;
    after = r.body["next_after"].get<int64_t>();
  }
  return jobs;
}

}  // namespace inac::systest
