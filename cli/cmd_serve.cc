#include "cli/cmd_serve.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/config.h"
#include "core/files.h"
#include "core/generators.h"
#include "core/json.h"
#include "core/models.h"
#include "http/address.h"
#include "http/tls_context.h"
#include "northbound/http_api.h"
#include "server/cluster_node.h"
#include "server/controller.h"
#include "southbound/device_config.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/p4runtime_switch_client.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/sqlite_storage.h"

namespace inac::cli {

namespace {

// This binary's path, for commands the banner suggests (`inac` is usually not on PATH in a
// build tree).
std::string SelfPath() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("inac") : path.string();
}

struct ServeArgs {
  std::string config;
  std::string db;
  std::string listen;
  bool demo = false;
  std::string algorithm;
  std::string memory_policy;
  uint64_t election_id = 0;
  std::string log_level = "info";
  std::string tls_cert;
  std::string tls_key;
  bool allow_insecure_http = false;
  // Cluster mode (docs/ha.md): comma-separated etcd URLs, this node's id, the lease TTL.
  std::string cluster_endpoints;
  std::string node_id;
  int64_t lease_ttl_s = 0;
  std::string advertise_url;
};

// The TLS flags into `config` (they win over the file).
void ApplyTlsFlags(const ServeArgs& args, ServeConfig* config) {
  if (!args.tls_cert.empty()) config->http.tls_cert_file = args.tls_cert;
  if (!args.tls_key.empty()) config->http.tls_key_file = args.tls_key;
  if (args.allow_insecure_http) config->allow_insecure_http = true;
}

std::string RandomToken() {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) out.push_back(hex[rd() % 16]);
  return out;
}

}  // namespace

std::vector<core::JobSpec> DemoJobs() {
  std::vector<core::JobSpec> jobs(3);
  jobs[0].name = "resnet50-pod0";
  jobs[0].tenant = "vision";
  jobs[0].priority = 2;
  jobs[0].model = "ResNet50";
  jobs[0].workers = {"h0_0_0", "h0_0_1", "h0_1_0", "h0_1_1"};
  jobs[0].parameter_servers = {"h1_0_0"};
  jobs[0].iterations = 1000;
  jobs[0].batch_size = 64;
  jobs[1].name = "vgg16-cross-pod";
  jobs[1].tenant = "vision";
  jobs[1].priority = 1;
  jobs[1].model = "VGG16";
  jobs[1].workers = {"h2_0_0", "h2_0_1", "h3_0_0", "h3_0_1"};
  jobs[1].parameter_servers = {"h2_1_0", "h3_1_0"};
  jobs[1].iterations = 500;
  jobs[1].batch_size = 32;
  jobs[2].name = "alexnet-cross-pod";
  jobs[2].tenant = "nlp";
  jobs[2].model = "AlexNet";
  jobs[2].workers = {"h1_1_0", "h1_1_1", "h3_1_1"};
  jobs[2].parameter_servers = {"h2_1_1"};
  jobs[2].iterations = 200;
  jobs[2].batch_size = 16;
  for (auto& j : jobs) {
    const core::ModelProfile* m = core::FindModel(*j.model);
    j.gradient_bytes = m->gradient_bytes;
    j.compute_ms = m->compute_ms;
  }
  return jobs;
}

namespace {

std::atomic<int> g_signal{0};

// Logs go to stderr; stdout carries only what a user or a test reads (the `listening on` line,
// the demo's banner).
void SetUpLogging(const ServeArgs& args) {
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "inac", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  auto level = spdlog::level::from_str(args.log_level);
  spdlog::set_level(level);
}

// The configuration `inac serve` runs with, once checked.
struct ServeSetup {
  ServeConfig config;
  bool cluster_mode = false;  // etcd endpoints given (docs/ha.md)
  bool tls = false;
  std::string host;  // of config.listen
  int port = 0;
  std::string demo_token;  // --demo without configured tokens: the admin token made up for it
};

// The configuration from the defaults, the file (--config) and the flags, which win over the
// file. kExitOk, or the exit code after the message on stderr.
int LoadServeConfig(const ServeArgs& args, ServeConfig* out) {
  ServeConfig config;
  if (args.demo) config.db = "inac-demo.db";
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    std::cerr << "inac: --tls-cert and --tls-key go together (the certificate chain and its key, "
                 "PEM files)\n";
    return kExitBadInput;
  }
  // Before the file too, so that its listen check sees TLS given on the command line.
  ApplyTlsFlags(args, &config);
  if (!args.config.empty()) {
    auto text = core::ReadFile(args.config);
    if (!text.ok()) {
      std::cerr << "inac: " << text.status().message() << "\n";
      return kExitBadInput;
    }
    std::vector<core::Problem> problems;
    auto parsed = ParseServeConfig(*text, config, &problems,
                                   std::filesystem::path(args.config).parent_path().string());
    if (!parsed) {
      PrintProblems(args.config, problems);
      return kExitBadInput;
    }
    config = *parsed;
  }
  if (!args.db.empty()) config.db = args.db;
  if (!args.listen.empty()) config.listen = args.listen;
  if (!args.algorithm.empty()) config.controller.algorithm = args.algorithm;
  if (!args.memory_policy.empty()) config.controller.memory_policy = args.memory_policy;
  if (args.election_id) config.controller.election_id = southbound::ElectionId{0, args.election_id};
  if (!args.cluster_endpoints.empty()) {
    config.cluster.endpoints = absl::StrSplit(args.cluster_endpoints, ',', absl::SkipWhitespace());
  }
  if (!args.node_id.empty()) config.cluster.node_id = args.node_id;
  if (args.lease_ttl_s) config.cluster.lease_ttl_s = args.lease_ttl_s;
  if (!args.advertise_url.empty()) config.cluster.advertise_url = args.advertise_url;
  const bool cluster_mode = !config.cluster.endpoints.empty();
  if (cluster_mode && args.demo) {
    std::cerr << "inac: --demo runs a single controller; it does not combine with "
                 "--cluster-endpoints\n";
    return kExitBadInput;
  }
  if (cluster_mode && config.cluster.node_id.empty()) {
    std::cerr << "inac: cluster mode (--cluster-endpoints) needs --node-id NAME, unique per "
                 "controller\n";
    return kExitBadInput;
  }
  if (cluster_mode && (config.cluster.lease_ttl_s < 2 || config.cluster.lease_ttl_s > 600)) {
    std::cerr << "inac: --lease-ttl-s must be in 2..600\n";
    return kExitBadInput;
  }
  ApplyTlsFlags(args, &config);
  *out = std::move(config);
  return kExitOk;
}

// Checks `setup->config` before anything is opened or bound: the listen address, the demo's
// token, whether the address may be served (CheckListenAllowed), the TLS files; warns about
// tokens in the clear and disabled authentication. kExitOk, or the exit code.
int CheckServeSetup(const ServeArgs& args, ServeSetup* setup) {
  ServeConfig& config = setup->config;
  setup->cluster_mode = !config.cluster.endpoints.empty();
  setup->tls = !config.http.tls_cert_file.empty();
  if (auto s = http::SplitHostPort(config.listen, &setup->host, &setup->port); !s.ok()) {
    std::cerr << "inac: --listen: " << s.message() << "\n";
    return kExitBadInput;
  }
  if (args.demo && config.tokens.empty()) {
    setup->demo_token = RandomToken();
    config.tokens.push_back(
        northbound::ApiToken{"demo-admin", setup->demo_token, northbound::Role::kAdmin, ""});
  }
  if (auto s = CheckListenAllowed(config); !s.ok()) {
    std::cerr << "inac: " << s.message() << "\n";
    return kExitBadInput;
  }
  if (setup->tls) {
    auto loaded = http::TlsServerContext::Load(config.http.tls_cert_file, config.http.tls_key_file);
    if (!loaded.ok()) {
      std::cerr << "inac: " << loaded.status().message() << "\n";
      return kExitBadInput;
    }
  } else if (!config.tokens.empty() && !http::IsLoopbackHost(setup->host)) {
    spdlog::warn(
        "event=insecure_http listen={} note=\"API tokens cross the network in the clear: "
        "allow_insecure_http is set; configure tls (cert, key) to serve HTTPS\"",
        config.listen);
  }
  if (config.tokens.empty()) {
    spdlog::warn(
        "event=auth_disabled reason=\"no tokens configured\" listen={} "
        "note=\"serving on loopback only\"",
        config.listen);
  }
  return kExitOk;
}

// What the controller runs on. Members are destroyed in reverse: the node before the database.
struct ServeStorage {
  std::unique_ptr<storage::SqliteStorage> sqlite;  // moved into `cluster` in cluster mode
  std::unique_ptr<server::ClusterNode> cluster;    // cluster mode only
  core::Storage* store = nullptr;                  // the one the controller uses
};

// Opens the database and, in cluster mode, the cluster node: the replicated inputs in etcd, this
// node's plans and switch records in the SQLite file (docs/ha.md). kExitOk, or the exit code.
int CreateStorage(const ServeSetup& setup, ServeStorage* out) {
  auto storage = storage::SqliteStorage::Open(setup.config.db);
  if (!storage.ok()) {
    std::cerr << "inac: " << storage.status().message() << "\n";
    return kExitFailure;
  }
  out->sqlite = std::move(*storage);
  out->store = out->sqlite.get();
  if (setup.cluster_mode) {
    server::ClusterConfig cluster = setup.config.cluster;
    // The epoch mirror lives beside the database (none for an in-memory one).
    if (cluster.state_file.empty() && setup.config.db != ":memory:") {
      cluster.state_file = setup.config.db + ".epoch";
    }
    auto node = server::ClusterNode::Create(cluster, std::move(out->sqlite));
    if (!node.ok()) {
      std::cerr << "inac: " << node.status().message() << "\n";
      return kExitBadInput;
    }
    out->cluster = std::move(*node);
    out->store = out->cluster->storage();
  }
  return kExitOk;
}

// The demo fabric: every switch of a fat-tree k=4 is an emulated P4Runtime switch, and the
// topology naming their addresses is stored. kExitOk, or the exit code.
int CreateDemoFabric(core::Storage* store,
                     std::vector<std::unique_ptr<southbound::emulator::EmulatedSwitch>>* fabric) {
  core::GeneratorOptions gen;
  auto topology = core::GenerateFatTree(4, gen).value();
  for (size_t i = 0; i < topology.switches.size(); ++i) {
    southbound::emulator::EmulatedSwitchOptions options;
    options.listen_address = "127.0.0.1:0";
    options.device_id = i + 1;
    auto sw = southbound::emulator::EmulatedSwitch::Start(options);
    if (!sw.ok()) {
      std::cerr << "inac: demo switch " << topology.switches[i].id << ": " << sw.status().message()
                << "\n";
      return kExitFailure;
    }
    topology.switches[i].p4runtime = core::P4RuntimeEndpoint{(*sw)->address(), i + 1};
    fabric->push_back(std::move(*sw));
  }
  auto put = store->topology().Put(topology, server::SystemClockMs());
  if (!put.ok()) {
    std::cerr << "inac: " << put.status().message() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

// The REST adapter over `controller`'s services. Members are destroyed in reverse: the API
// before the health service it points to.
struct ServeApi {
  // Cluster mode: a follower's health is its election's and etcd's (its loop does not run).
  std::optional<server::ClusterHealthService> cluster_health;
  std::unique_ptr<northbound::HttpApi> api;
  int port = 0;  // bound
};

// Creates the API and binds its address -- first, so that a second controller started on a
// taken address exits before its loop touches a switch. kExitOk, or the exit code.
int StartApi(const ServeSetup& setup, server::ClusterNode* cluster, server::Controller* controller,
             ServeApi* out) {
  const ServeConfig& config = setup.config;
  northbound::HttpApiOptions http_options;
  http_options.tokens = config.tokens;
  http_options.server = config.http;
  http_options.threads = config.http.workers;
  http_options.max_body_bytes = config.http.max_body_bytes;
  http_options.allow_insecure_http = config.allow_insecure_http;
  if (cluster) http_options.not_leader = [cluster] { return cluster->NotLeader(); };
  server::ApiServices services = controller->services();
  if (cluster) {
    out->cluster_health.emplace(controller, cluster);
    services.health = &*out->cluster_health;
  }
  out->api = std::make_unique<northbound::HttpApi>(services, http_options);
  auto bound = out->api->Bind(setup.host, setup.port);
  if (!bound.ok()) {
    std::cerr << "inac: " << bound.status().message() << "\n";
    return kExitFailure;
  }
  out->port = *bound;
  return kExitOk;
}

// Starts the controller loop: at once, or in cluster mode once this node is elected.
// kExitOk, or the exit code.
int StartController(const ServeSetup& setup, int port, server::ClusterNode* cluster,
                    server::Controller* controller) {
  if (!cluster) {
    if (auto s = controller->Start(); !s.ok()) {
      std::cerr << "inac: " << s.message() << "\n";
      return kExitBadInput;
    }
    return kExitOk;
  }
  // A follower until elected: the controller loop (planning, switch writes) runs only on the
  // leader, started with the leader's fencing token as P4Runtime election id. A leader that
  // loses its lease exits (code 3) and is restarted as a follower by its supervisor.
  const server::ClusterConfig& cc = setup.config.cluster;
  const char* scheme = setup.tls ? "https://" : "http://";
  std::string url =
      cc.advertise_url.empty() ? absl::StrCat(scheme, setup.host, ":", port) : cc.advertise_url;
  spdlog::info("event=cluster_follower node={} url={} etcd={} lease_ttl_s={}", cc.node_id, url,
               absl::StrJoin(cc.endpoints, ","), cc.lease_ttl_s);
  cluster->Start(
      url,
      [controller, node = cc.node_id](southbound::ElectionId id) {
        spdlog::info("event=cluster_leader node={} epoch={} token={} election_id={}", node, id.high,
                     id.low, southbound::ToString(id));
        controller->SetElectionId(id);
        if (auto s = controller->Start(); !s.ok()) {
          spdlog::error("event=controller_start_failed error=\"{}\"", s.ToString());
          spdlog::shutdown();
          std::_Exit(kExitFailure);
        }
      },
      [node = cc.node_id](const std::string& why) {
        spdlog::error("event=cluster_leadership_lost node={} reason=\"{}\" action=exit", node, why);
        spdlog::shutdown();
        std::cout.flush();
        std::_Exit(kExitLostLeadership);
      });
  return kExitOk;
}

// --demo: submits the sample jobs and prints the banner (addresses, token, commands to try).
void StartDemo(const ServeSetup& setup, int port, server::Controller* controller) {
  const char* scheme = setup.tls ? "https://" : "http://";
  const std::string& host = setup.host;
  const std::string& token = setup.demo_token;
  std::string base = absl::StrCat(scheme, host, ":", port, "/api/v1");
  for (const auto& spec : DemoJobs()) {
    auto r = controller->jobs().SubmitJob(
        spec, core::IdempotencyKey{"demo-" + spec.name, core::JobSpecToJson(spec).dump()});
    if (!r.ok())
      spdlog::warn("event=demo_job_failed job={} error=\"{}\"", spec.name, r.status().ToString());
  }
  std::cout << "\nINAC demo: fat-tree k=4, 20 emulated P4Runtime switches, 3 sample jobs\n"
            << "  Dashboard: " << scheme << host << ":" << port
            << "/   (paste the token below; docs/dashboard.md)\n"
            << "  API:       " << base << "   (reference: api/openapi.yaml)\n"
            << "  Watch:     " << base << "/switches , " << base << "/jobs , " << base
            << "/events/stream (JSON and server-sent events, with the token below as "
               "Authorization: Bearer)\n"
            << "  CLI:       INAC_SERVER=" << scheme << host << ":" << port
            << " INAC_TOKEN=" << token << " " << SelfPath() << " job list\n"
            << "  Token:     " << token << "\n"
            << "  Try:       curl -H 'Authorization: Bearer " << token << "' " << base << "/jobs\n"
            << "  Stop with Ctrl-C.\n"
            << std::endl;
}

// Serves the API on a thread of its own until SIGINT or SIGTERM; returns that thread (joined by
// ShutDown after it stopped the API).
std::thread RunUntilSignal(northbound::HttpApi* api) {
  std::thread server([api] { api->Serve(); });
  std::signal(SIGINT, [](int s) { g_signal = s; });
  std::signal(SIGTERM, [](int s) { g_signal = s; });
  std::signal(SIGPIPE, SIG_IGN);
  while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("event=shutdown signal={}", g_signal.load());
  return server;
}

// Stops the API, the controller (within the configured grace; past it the process exits, see
// below), the cluster node and the demo switches, each step timed so that a slow shutdown names
// its cause in the log. Returns the exit code.
int ShutDown(const ServeConfig& config, northbound::HttpApi* api, std::thread server,
             server::Controller* controller, server::ClusterNode* cluster,
             std::vector<std::unique_ptr<southbound::emulator::EmulatedSwitch>>* fabric) {
  auto since = [start = std::chrono::steady_clock::now()] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  if (cluster) {
    // The switches first: the loop stops writing before the lease is revoked (another node
    // takes over at once once it is gone). The port closes only after that: a follower that
    // finds it refusing takes the leader for dead and revokes its lease (server/cluster_node.h).
    if (!controller->StopWithin(absl::Milliseconds(config.shutdown_grace_ms))) {
      spdlog::warn("event=stopped abandoned=plan_in_progress");
      spdlog::shutdown();
      std::_Exit(kExitOk);
    }
    cluster->Stop();
  }
  api->Stop();
  server.join();
  const double api_ms = since();
  if (!controller->StopWithin(absl::Milliseconds(config.shutdown_grace_ms))) {
    // The loop is inside a solve. Every acknowledged command is committed (each is one SQLite
    // transaction), so exiting now loses only the plan being computed, which the next start
    // recomputes; waiting could take as long as the solve (seconds with 1,000 jobs).
    spdlog::warn("event=stopped api_ms={:.1f} total_ms={:.1f} abandoned=plan_in_progress", api_ms,
                 since());
    spdlog::shutdown();
    std::cout.flush();
    std::_Exit(kExitOk);
  }
  const double controller_ms = since() - api_ms;
  for (auto& sw : *fabric) sw->Shutdown();
  spdlog::info("event=stopped api_ms={:.1f} controller_ms={:.1f} total_ms={:.1f}", api_ms,
               controller_ms, since());
  return kExitOk;
}

// options -> create -> run -> shut down.
int Serve(const ServeArgs& args) {
  SetUpLogging(args);
  ServeSetup setup;
  if (int code = LoadServeConfig(args, &setup.config); code != kExitOk) return code;
  if (int code = CheckServeSetup(args, &setup); code != kExitOk) return code;
  const ServeConfig& config = setup.config;

  ServeStorage storage;
  if (int code = CreateStorage(setup, &storage); code != kExitOk) return code;
  server::ClusterNode* cluster = storage.cluster.get();
  std::vector<std::unique_ptr<southbound::emulator::EmulatedSwitch>> fabric;
  if (args.demo) {
    if (int code = CreateDemoFabric(storage.store, &fabric); code != kExitOk) return code;
  }
  server::Controller controller(
      storage.store,
      cluster ? cluster->FencedFactory(southbound::CreateP4RuntimeClient)
              : server::SwitchClientFactory(southbound::CreateP4RuntimeClient),
      server::SystemClockMs, config.controller);
  ServeApi api;
  if (int code = StartApi(setup, cluster, &controller, &api); code != kExitOk) return code;
  if (int code = StartController(setup, api.port, cluster, &controller); code != kExitOk) {
    return code;
  }
  // Tests read this line to find the port.
  std::cout << "listening on " << setup.host << ":" << api.port << std::endl;
  spdlog::info(
      "event=serving api={} db={} tls={}",
      absl::StrCat(setup.tls ? "https://" : "http://", setup.host, ":", api.port, "/api/v1"),
      config.db, setup.tls);
  if (args.demo) StartDemo(setup, api.port, &controller);
  if (isatty(STDERR_FILENO)) {
    // A person at a terminal: say that this blocks, and how to go on.
    std::cerr << "inac serve: runs until Ctrl-C or SIGTERM (start it with & or in another "
                 "terminal); client verbs reach it with INAC_SERVER="
              << (setup.tls ? "https://" : "http://") << setup.host << ":" << api.port << "\n";
  }

  std::thread server = RunUntilSignal(api.api.get());
  return ShutDown(config, api.api.get(), std::move(server), &controller, cluster, &fabric);
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the controller (REST API + control loop)");
  cmd->add_option("--config", args->config, "Configuration file (JSON)");
  cmd->add_option("--db", args->db, "SQLite database file (default ./inac.db)");
  cmd->add_option("--listen", args->listen, "REST API address host:port (default 127.0.0.1:8080)");
  cmd->add_flag("--demo", args->demo,
                "Embedded demo: in-process emulated fat-tree k=4 fabric and sample jobs");
  cmd->add_option("--algorithm", args->algorithm, "Routing algorithm (default trees)");
  cmd->add_option("--memory-policy", args->memory_policy,
                  "Switch memory policy: esa (default), atp, switchml or no_ina")
      ->check(CLI::IsMember({"esa", "atp", "switchml", "no_ina"}));
  cmd->add_option("--election-id", args->election_id,
                  "P4Runtime election id (default: one above the highest stored)");
  cmd->add_option("--tls-cert", args->tls_cert,
                  "Serve HTTPS: PEM certificate chain, server certificate first (with --tls-key; "
                  "overrides the config's tls.cert)");
  cmd->add_option("--tls-key", args->tls_key,
                  "PEM private key (unencrypted) of --tls-cert (overrides the config's tls.key)");
  cmd->add_flag("--allow-insecure-http", args->allow_insecure_http,
                "Allow API tokens over plain HTTP on a non-loopback address (logged as a warning)");
  cmd->add_option("--cluster-endpoints", args->cluster_endpoints,
                  "Cluster mode (docs/ha.md): comma-separated etcd URLs, e.g. "
                  "http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379");
  cmd->add_option("--node-id", args->node_id, "Cluster mode: this controller's unique name");
  cmd->add_option("--lease-ttl-s", args->lease_ttl_s,
                  "Cluster mode: leader lease TTL in seconds (default 2, etcd's minimum with its "
                  "default election timeout; keep-alive every TTL/4)");
  cmd->add_option("--advertise-url", args->advertise_url,
                  "Cluster mode: this node's API URL as clients reach it (default "
                  "http(s)://LISTEN)");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error")
      ->capture_default_str();
  cmd->callback([args] {
    int code = Serve(*args);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace inac::cli
