// Request-derived strings never reach a log line or a terminal raw: every control character
// (0x00-0x1f, DEL), ESC sequences and non-ASCII bytes, percent-encoded into every route of the
// REST API, and the same bytes stored in the audit log and printed by `inac db audit`. A real
// `inac serve` with tokens (so refused requests are logged) writes its log to a file, which is read
// back line by line: no byte outside printable ASCII, and the marker that follows the hostile
// bytes never starts a line of its own.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "northbound/api_client.h"
#include "storage/sqlite_storage.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

// The bytes a hostile request tries: every C0 control, DEL, ESC sequences (CSI, OSC), a C1 CSI
// and a UTF-8 line separator.
std::vector<std::string> HostileBytes() {
  std::vector<std::string> out;
  for (int c = 0; c < 0x20; ++c) out.push_back(std::string(1, static_cast<char>(c)));
  out.push_back("\x7f");
  out.push_back("\x1b[31mred\x1b[0m");
  out.push_back("\x1b]0;title\x07");
  out.push_back(
      "\x9b"
      "2J");
  out.push_back("\xe2\x80\xa8");
  return out;
}

std::string PercentEncode(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// The first byte of `text` outside printable ASCII and space (the log's own lines end in "\n",
// split off before), or -1.
int FirstRawByte(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f) return c;
  }
  return -1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LogInjectionTest, NoRequestWritesARawControlCharacterIntoTheLog) {
  const std::string dir = MakeTempDir("log-injection");
  ControllerProcess serve;
  const Json config = {
      {"tokens",
       Json::array({{{"name", "ops"}, {"token", "ops-token-0123456789"}, {"role", "admin"}}})}};
  ASSERT_TRUE(serve.Start(dir, "serve", dir + "/inac.db", config).ok());
  const std::string log = serve.process()->log_path();
  // No token: a route that matches is refused (401) and logged.
  auto client = northbound::ApiClient::Create(
      {.server = serve.base_url(), .token = "", .timeout_ms = 10000, .keep_alive = true});
  ASSERT_TRUE(client.ok()) << client.status();
  const auto send = [&](const std::string& method, const std::string& target) {
    auto reply = (*client)->SendRaw({.method = method, .target = target, .body = ""});
    return reply.ok() ? reply->http_status : 0;
  };

  // Every route of the API (api/openapi.yaml), with the hostile bytes as the id and as a path
  // segment of its own; no token, so a route that matches is refused with 401 and logged.
  const std::vector<std::string> routes = {
      "/api/v1/jobs/{}",
      "/api/v1/jobs/{}/config",
      "/api/v1/jobs/{}/progress",
      "/api/v1/jobs/{}/data-path",
      "/api/v1/switches/{}",
      "/api/v1/links/{}",
      "/api/v1/jobs?tenant={}",
      "/api/v1/{}",
      "/api/v1/topology/{}",
      "/{}",
      "/ui/{}",
      "/api/v1/events?since={}",
  };
  int requests = 0;
  for (const std::string& bytes : HostileBytes()) {
    for (const std::string& route : routes) {
      std::string path = route;
      path.replace(path.find("{}"), 2, absl::StrCat("x", PercentEncode(bytes), "FORGED"));
      for (const char* method : {"GET", "POST", "DELETE", "PATCH"}) {
        const int status = send(method, path);
        EXPECT_GE(status, 400) << method << " " << path;
        EXPECT_LT(status, 500) << method << " " << path;
        ++requests;
      }
    }
  }
  // A request that is refused and logged for sure, so the check below reads a log that has lines.
  EXPECT_EQ(send("GET", "/api/v1/jobs"), 401);
  EXPECT_EQ(serve.Terminate(), 0);

  const std::string text = ReadAll(log);
  int refused = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::string l(line);
    EXPECT_EQ(FirstRawByte(l), -1) << "raw byte in the log line: " << l;
    if (absl::StrContains(l, "event=request_refused")) ++refused;
    // The marker that follows the hostile bytes in every request: on a line of its own (or after
    // anything but the logged path) it would be a forged line.
    if (const size_t at = l.find("FORGED"); at != std::string::npos) {
      const size_t path = l.find(" path=");
      EXPECT_TRUE(path != std::string::npos && path < at) << "forged line: " << l;
    }
  }
  EXPECT_GE(refused, 1) << text;
  EXPECT_GT(requests, 1000);
}

TEST(LogInjectionTest, DbAuditPrintsStoredControlCharactersEscaped) {
  const std::string dir = MakeTempDir("audit-injection");
  const std::string db = dir + "/inac.db";
  {
    auto storage = storage::SqliteStorage::Open(db);
    ASSERT_TRUE(storage.ok()) << storage.status();
    for (const std::string& bytes : HostileBytes()) {
      core::AuditEntry e{.time_ms = 1,
                         .actor = "ops" + bytes,
                         .role = "admin",
                         .remote_addr = "127.0.0.1",
                         .method = "DELETE" + bytes,
                         .path = "/api/v1/switches/x" + bytes + "2026-01-01 forged row",
                         .status = 404};
      ASSERT_TRUE((*storage)->audit().Append(e).ok());
    }
  }
  const CliRun table = RunInac("db audit --db " + db + " --limit 1000", dir);
  ASSERT_EQ(table.exit, 0) << table.out;
  const std::string out = table.out.substr(0, table.out.find("--stderr--"));
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    const std::string l(line);
    EXPECT_EQ(FirstRawByte(l), -1) << "raw byte in the table: " << l;
    if (absl::StrContains(l, "forged")) ++rows;
  }
  // One row per entry: no newline in a stored path started a row of its own.
  EXPECT_EQ(rows, static_cast<int>(HostileBytes().size())) << out;
  EXPECT_TRUE(absl::StrContains(out, "/api/v1/switches/x\\x0a2026-01-01\\x20forged\\x20row"))
      << out;

  // --json escapes by being JSON: every C0 control (ESC included) as \u00XX; DEL, which JSON does
  // not escape and terminals ignore, may stay.
  const CliRun json = RunInac("db audit --db " + db + " --limit 1000 --json", dir);
  ASSERT_EQ(json.exit, 0) << json.out;
  const std::string jout = json.out.substr(0, json.out.find("--stderr--"));
  for (unsigned char c : jout) {
    if (c != '\n') {
      EXPECT_FALSE(c < 0x20) << static_cast<int>(c);
    }
  }
}

}  // namespace
}  // namespace inac::systest
