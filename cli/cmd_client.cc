#include "cli/cmd_client.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/files.h"
#include "northbound/api_client.h"

namespace inac::cli {

namespace {

using Json = nlohmann::json;

struct ClientArgs {
  std::string server;
  std::string token;
  std::string ca_cert;
};

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(fallback);
}

void AddClientOptions(CLI::App* cmd, ClientArgs* a) {
  a->server = EnvOr("INAC_SERVER", "http://127.0.0.1:8080");
  a->token = EnvOr("INAC_TOKEN", "");
  cmd->add_option("--server", a->server,
                  "Controller URL (default $INAC_SERVER or http://127.0.0.1:8080)");
  cmd->add_option("--token", a->token, "Bearer token (default $INAC_TOKEN)");
  AddCaCertOption(cmd, &a->ca_cert);
}

// Whether this run sends a token (--token or $INAC_TOKEN), for the hint of a 401. One verb per
// process: set by Connect.
bool g_sends_token = false;

// Prints `status` on stderr, with a hint for a refused token, and ends the verb with its exit
// code.
[[noreturn]] void Fail(const absl::Status& status) {
  std::cerr << "inac: " << status.message() << "\n";
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    std::cerr << (g_sends_token ? "hint: the controller does not know this token (from --token or "
                                  "$INAC_TOKEN, which may be left over from another controller)\n"
                                : "hint: this controller has API tokens: pass one with --token or "
                                  "$INAC_TOKEN (`inac serve --demo` prints an admin token)\n");
  }
  throw CLI::RuntimeError(northbound::ExitCodeFor(status));
}

std::unique_ptr<northbound::ApiClient> Connect(const ClientArgs& a) {
  g_sends_token = !a.token.empty();
  northbound::ApiClientOptions options{a.server, a.token};
  options.ca_cert_file = a.ca_cert;
  auto client = northbound::ApiClient::Create(options);
  if (!client.ok()) Fail(client.status());
  return std::move(*client);
}

// One call; prints the body and returns it, or fails the verb.
Json CallOrFail(northbound::ApiClient& client, const std::string& method, const std::string& path,
                const Json& body = nullptr,
                const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  auto reply = client.Call(method, path, body, headers);
  if (!reply.ok()) Fail(reply.status());
  return reply->body;
}

// The file's JSON; exit 2 when it cannot be read or parsed.
Json ReadJsonFile(const std::string& path) {
  auto text = core::ReadFile(path);
  if (!text.ok()) Fail(absl::InvalidArgumentError(text.status().message()));
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail(absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON")));
  return j;
}

// A job id argument: a positive integer (exit 2 otherwise).
void AddIdArg(CLI::App* cmd, int64_t* id) {
  cmd->add_option("id", *id, "Job id")
      ->required()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int64_t v = 0;
            if (absl::SimpleAtoi(text, &v) && v >= 1) return "";
            return "a job id is a positive integer, not \"" + text.substr(0, 40) + "\"";
          },
          "ID"));
}

// Percent-encodes everything but RFC 3986 unreserved characters (for query values).
std::string UrlEncode(const std::string& v) {
  std::string out;
  for (unsigned char ch : v) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", ch);
      out += buf;
    }
  }
  return out;
}

void PrintJobTable(const Json& jobs) {
  std::cout << std::left << std::setw(8) << "ID" << std::setw(11) << "STATE" << std::setw(14)
            << "TENANT" << std::setw(10) << "PRIORITY" << std::setw(22) << "PROGRESS"
            << "NAME\n";
  for (const Json& j : jobs) {
    const Json& spec = j.value("spec", Json::object());
    std::string progress = absl::StrCat(j.value("iterations_done", int64_t{0}), "/",
                                        spec.value("iterations", int64_t{0}));
    std::cout << std::left << std::setw(8) << j.value("id", int64_t{0}) << std::setw(11)
              << j.value("state", "") << std::setw(14) << spec.value("tenant", "") << std::setw(10)
              << spec.value("priority", 0) << std::setw(22) << progress << spec.value("name", "")
              << "\n";
  }
}

}  // namespace

void AddJobClientCommands(CLI::App* job) {
  {
    struct Args : ClientArgs {
      std::string file;
      std::string key;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd = job->add_subcommand(
        "submit",
        "Submit the jobs of a file ({\"jobs\": [...]} or one job object) to a controller");
    cmd->add_option("file", a->file, "Job JSON file")->required();
    cmd->add_option("--idempotency-key", a->key,
                    "Idempotency-Key header; with several jobs, job i gets KEY-i. A retry with the "
                    "same key returns the job created before instead of a second one");
    AddClientOptions(cmd, a.get());
    cmd->callback([a] {
      Json doc = ReadJsonFile(a->file);
      Json jobs = Json::array();
      if (doc.is_object() && doc.contains("jobs")) {
        if (!doc["jobs"].is_array() || doc["jobs"].empty()) {
          Fail(absl::InvalidArgumentError(
              absl::StrCat(a->file, ": jobs: must be a non-empty array")));
        }
        jobs = doc["jobs"];
      } else if (doc.is_object()) {
        jobs.push_back(doc);
      } else {
        Fail(absl::InvalidArgumentError(
            absl::StrCat(a->file, ": must be a job object or {\"jobs\": [...]}")));
      }
      auto client = Connect(*a);
      for (size_t i = 0; i < jobs.size(); ++i) {
        std::vector<std::pair<std::string, std::string>> headers;
        if (!a->key.empty()) {
          headers.emplace_back("Idempotency-Key",
                               jobs.size() == 1 ? a->key : absl::StrCat(a->key, "-", i));
        }
        auto reply = client->Call("POST", "/jobs", jobs[i], headers);
        if (!reply.ok()) {
          // Say which job was refused; the ones before it were created (and printed).
          Fail(absl::Status(reply.status().code(),
                            absl::StrCat(a->file, ": jobs[", i, "]: ", reply.status().message())));
        }
        std::cout << reply->body.dump() << "\n";
      }
    });
  }
  {
    struct Args : ClientArgs {
      std::string state;
      std::string tenant;
      int64_t limit = 100;
      bool all = false;
      bool json = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd = job->add_subcommand("list", "List a controller's jobs (newest filters first)");
    cmd->add_option("--state", a->state, "Only these states (comma-separated)");
    cmd->add_option("--tenant", a->tenant, "Only this tenant's jobs");
    cmd->add_option("--limit", a->limit, "Page size (1..1000)")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_flag("--all", a->all, "Follow the cursor through every page");
    cmd->add_flag("--json", a->json, "Print the jobs as a JSON array");
    AddClientOptions(cmd, a.get());
    cmd->callback([a] {
      auto client = Connect(*a);
      Json all = Json::array();
      int64_t after = 0;
      while (true) {
        std::string query = absl::StrCat("?limit=", a->limit, "&after=", after);
        if (!a->state.empty()) absl::StrAppend(&query, "&state=", UrlEncode(a->state));
        if (!a->tenant.empty()) absl::StrAppend(&query, "&tenant=", UrlEncode(a->tenant));
        Json page = CallOrFail(*client, "GET", "/jobs" + query);
        for (const Json& j : page.value("jobs", Json::array())) all.push_back(j);
        const Json& next = page.value("next_after", Json());
        if (!a->all || !next.is_number_integer()) break;
        after = next.get<int64_t>();
      }
      if (a->json) {
        std::cout << all.dump(2) << "\n";
      } else {
        PrintJobTable(all);
      }
    });
  }
  struct IdArgs : ClientArgs {
    int64_t id = 0;
  };
  auto one = [job](const char* name, const char* help, const char* method, const char* suffix) {
    auto a = std::make_shared<IdArgs>();
    CLI::App* cmd = job->add_subcommand(name, help);
    AddIdArg(cmd, &a->id);
    AddClientOptions(cmd, a.get());
    std::string m = method, s = suffix;
    cmd->callback([a, m, s] {
      auto client = Connect(*a);
      std::cout << CallOrFail(*client, m, absl::StrCat("/jobs/", a->id, s)).dump(2) << "\n";
    });
  };
  one("get", "Show one job", "GET", "");
  one("config", "Show what a job's workers need (aggregation, PS shares, batch size, priority)",
      "GET", "/config");
  one("cancel", "Cancel a job (its switch entries are removed)", "DELETE", "");
}

void AddTopoClientCommands(CLI::App* topo) {
  {
    struct Args : ClientArgs {
      std::string file;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd = topo->add_subcommand(
        "apply", "Replace a controller's topology with a file (validated by the controller)");
    cmd->add_option("file", a->file, "Topology JSON file")->required();
    AddClientOptions(cmd, a.get());
    cmd->callback([a] {
      Json doc = ReadJsonFile(a->file);
      auto client = Connect(*a);
      Json reply = CallOrFail(*client, "PUT", "/topology", doc);
      std::ostringstream summary;
      summary << a->file << ": applied";
      if (reply.is_object() && reply.contains("version"))
        summary << ", version " << reply["version"];
      std::cout << summary.str() << "\n";
    });
  }
  {
    struct Args : ClientArgs {
      std::string link, status;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd = topo->add_subcommand(
        "link", "Report a link down or up to a controller (PATCH /links/{id}; jobs re-planned)");
    cmd->add_option("link", a->link, "The link id")->required();
    cmd->add_option("status", a->status, "down | up")
        ->required()
        ->check(CLI::IsMember({"down", "up"}));
    AddClientOptions(cmd, a.get());
    cmd->callback([a] {
      auto client = Connect(*a);
      std::cout
          << CallOrFail(*client, "PATCH", "/links/" + a->link, Json{{"status", a->status}}).dump(2)
          << "\n";
    });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    CLI::App* cmd = topo->add_subcommand("show", "Print a controller's topology");
    AddClientOptions(cmd, a.get());
    cmd->callback([a] {
      auto client = Connect(*a);
      std::cout << CallOrFail(*client, "GET", "/topology").dump(2) << "\n";
    });
  }
}

}  // namespace inac::cli
