// `inac lab up|down` (docs/lab.md) as real processes: network namespaces, veths
// and BMv2 switches on this machine. Every lab lives in its own temporary folder, whose path
// gives the lab its own name prefix, so the tests can run in parallel. The tests that create labs
// are skipped, with the reason, when not root or when BMv2 (simple_switch_grpc) is not found;
// TearDown runs `inac lab down` (and, if that fails, removes what lab.json names) even after a
// failed assertion.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/cmd_lab.h"
#include "core/json.h"
#include "core/plan.h"
#include "southbound/switch_session.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

// stdout of a shell command (test code: the arguments are the test's own names).
std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

Json ShellJson(const std::string& command) {
  return Json::parse(Shell(command), nullptr, /*allow_exceptions=*/false);
}

std::string Mac(uint64_t mac) {
  char buf[18];
  std::snprintf(
      buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", static_cast<unsigned>((mac >> 40) & 0xff),
      static_cast<unsigned>((mac >> 32) & 0xff), static_cast<unsigned>((mac >> 24) & 0xff),
      static_cast<unsigned>((mac >> 16) & 0xff), static_cast<unsigned>((mac >> 8) & 0xff),
      static_cast<unsigned>(mac & 0xff));
  return buf;
}

// The process runs (not gone, not a zombie).
bool ProcessRuns(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Why the lab tests cannot run here; "" when they can.
std::string LabSkipReason() {
  if (geteuid() != 0) return "the lab tests need root (network namespaces, veth interfaces)";
  auto bmv2 = cli::FindBmv2("");
  if (!bmv2.ok()) return std::string(bmv2.status().message());
  if (std::system((*bmv2 + " --version >/dev/null 2>&1").c_str()) != 0) {
    return *bmv2 +
           " --version fails: are its runtime libraries installed "
           "(../shared/peers/install-runtime-deps.sh)?";
  }
  return "";
}

// One switch, three hosts.
core::Topology Star() {
  core::Topology t;
  core::Switch s;
  s.id = "s0";
  s.ina = core::InaConfig{true, 100, 4096};
  t.switches.push_back(s);
  for (int i = 0; i < 3; ++i) {
    core::Host h;
    h.id = absl::StrCat("h", i);
    t.hosts.push_back(h);
    core::Link l;
    l.a = "s0";
    l.b = h.id;
    l.id = core::DefaultLinkId(l.a, l.b);
    l.gbps = 10;
    t.links.push_back(l);
  }
  return t;
}

class LabCliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("labcli");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }
  std::string dir_;
};

TEST_F(LabCliTest, BadTopologyIsExit2WithEveryProblem) {
  // h0 has two links, and h1-h2 is a host-to-host link.
  core::Topology t = Star();
  core::Link extra;
  extra.a = "h0";
  extra.b = "s0";
  extra.id = "second";
  extra.gbps = 10;
  t.links.push_back(extra);
  core::Link hh;
  hh.a = "h1";
  hh.b = "h2";
  hh.id = "hh";
  hh.gbps = 10;
  t.links.push_back(hh);
  const std::string file = WriteFile(dir_ + "/bad.json", core::TopologyToJson(t).dump());
  const CliRun run =
      RunInac("lab up --no-controller --topology " + file + " --dir " + dir_ + "/lab", dir_);
  EXPECT_EQ(run.exit, 2) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "links[3]: host \"h0\" has a second link")) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "links[4]: links two hosts")) << run.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/lab/lab.json"));
}

TEST_F(LabCliTest, MissingBmv2IsExit1AndSaysHowToInstall) {
  const std::string file = WriteFile(dir_ + "/star.json", core::TopologyToJson(Star()).dump());
  const CliRun run =
      RunInac("lab up --no-controller --bmv2 " + dir_ + "/nowhere/simple_switch_grpc --topology " +
                  file + " --dir " + dir_ + "/lab",
              dir_);
  EXPECT_EQ(run.exit, 1) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "BMv2 not found")) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "INAC against BMv2")) << run.out;
}

TEST_F(LabCliTest, DownWithoutALabSucceeds) {
  const CliRun run = RunInac("lab down --dir " + dir_, dir_);
  EXPECT_EQ(run.exit, 0) << run.out;
}

class LabTest : public testing::Test {
 protected:
  void SetUp() override {
    if (std::string reason = LabSkipReason(); !reason.empty()) GTEST_SKIP() << reason;
    dir_ = MakeTempDir("lab");
    ASSERT_FALSE(dir_.empty());
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (std::filesystem::exists(dir_ + "/lab.json")) {
      const CliRun down = RunInac("lab down --dir " + dir_, dir_);
      if (down.exit != 0) {
        ADD_FAILURE() << "lab down in TearDown: " << down.out;
        // Last resort: what lab.json names.
        const Json lab = LabJson();
        for (const Json& p : lab.value("processes", Json::array())) {
          kill(p.value("pid", 0), SIGKILL);
        }
        for (const Json& ns : lab.value("namespaces", Json::array())) {
          Shell("ip netns del " + ns.get<std::string>());
        }
        for (const Json& i : lab.value("root_interfaces", Json::array())) {
          Shell("ip link del " + i.get<std::string>());
        }
      }
    }
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  Json LabJson() const {
    std::ifstream in(dir_ + "/lab.json");
    return Json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  // `inac lab up` on `topology`; the parsed lab.json.
  Json Up(const core::Topology& topology, const std::string& extra = "--no-controller") {
    const std::string file = WriteFile(dir_ + "/input.json", core::TopologyToJson(topology).dump());
    const CliRun run = RunInac("lab up " + extra + " --topology " + file + " --dir " + dir_, dir_);
    EXPECT_EQ(run.exit, 0) << run.out;
    EXPECT_TRUE(absl::StrContains(run.out, "ip netns exec")) << run.out;
    return LabJson();
  }

  // Every host namespace, address, MAC and neighbour entry; every BMv2 process and gRPC server.
  void ExpectUp(const core::Topology& t, const Json& lab) {
    ASSERT_TRUE(lab.is_object());
    EXPECT_EQ(lab.at("state"), "up");
    const std::string netns = Shell("ip netns list");
    ASSERT_EQ(lab.at("hosts").size(), t.hosts.size());
    for (const Json& h : lab.at("hosts")) {
      const std::string id = h.at("id"), ns = h.at("namespace");
      SCOPED_TRACE("host " + id + " in " + ns);
      EXPECT_TRUE(absl::StrContains(netns, ns)) << netns;
      const Json links = ShellJson("ip -n " + ns + " -j addr show");
      ASSERT_TRUE(links.is_array()) << Shell("ip -n " + ns + " addr show");
      bool eth0 = false, lo_up = false;
      for (const Json& l : links) {
        const Json flags = l.value("flags", Json::array());
        const bool up = std::find(flags.begin(), flags.end(), "UP") != flags.end();
        if (l.at("ifname") == "lo") lo_up = up;
        if (l.at("ifname") != "eth0") continue;
        eth0 = true;
        EXPECT_TRUE(up);
        EXPECT_EQ(l.at("address"), Mac(core::NodeMac(t, id)));
        int inet = 0;
        for (const Json& a : l.at("addr_info")) {
          EXPECT_EQ(a.at("family"), "inet") << "IPv6 must be off";
          if (a.at("family") != "inet") continue;
          ++inet;
          EXPECT_EQ(a.at("local"), core::FormatIpv4(core::NodeAddress(t, id)));
          EXPECT_EQ(a.at("prefixlen"), 8);
        }
        EXPECT_EQ(inet, 1);
      }
      EXPECT_TRUE(eth0);
      EXPECT_TRUE(lo_up);
      EXPECT_EQ(links.size(), 2u) << "lo and eth0 only";
      // A permanent entry for every other host and every switch.
      const Json neigh = ShellJson("ip -n " + ns + " -j neigh show dev eth0");
      ASSERT_TRUE(neigh.is_array());
      std::set<std::string> expected, seen;
      for (const core::Host& o : t.hosts) {
        if (o.id != id) expected.insert(core::FormatIpv4(core::NodeAddress(t, o.id)));
      }
      for (const core::Switch& s : t.switches) {
        expected.insert(core::FormatIpv4(core::NodeAddress(t, s.id)));
      }
      for (const Json& n : neigh) {
        seen.insert(n.at("dst"));
        const Json state = n.value("state", Json::array());
        EXPECT_NE(std::find(state.begin(), state.end(), "PERMANENT"), state.end()) << n.dump();
      }
      EXPECT_EQ(seen, expected);
    }
    // The switches: BMv2 runs, answers on gRPC, has one port per link.
    const Json written = Json::parse(std::ifstream(dir_ + "/topology.json"), nullptr, false);
    std::vector<core::Problem> problems;
    const core::Topology lab_topology = core::TopologyFromJson(written, &problems);
    ASSERT_TRUE(problems.empty()) << core::FormatProblems(problems);
    ASSERT_EQ(lab.at("switches").size(), t.switches.size());
    for (size_t i = 0; i < t.switches.size(); ++i) {
      const Json& s = lab.at("switches")[i];
      SCOPED_TRACE("switch " + s.at("id").get<std::string>());
      ASSERT_TRUE(s.at("pid").is_number());
      EXPECT_TRUE(ProcessRuns(s.at("pid").get<pid_t>()));
      ASSERT_TRUE(lab_topology.switches[i].p4runtime.has_value());
      EXPECT_EQ(lab_topology.switches[i].p4runtime->address, s.at("grpc_address"));
      EXPECT_EQ(lab_topology.switches[i].p4runtime->target, core::TargetKind::kBmv2);
      southbound::SessionOptions options;
      options.address = s.at("grpc_address");
      options.device_id = s.at("device_id");
      options.rpc_timeout = absl::Seconds(5);
      southbound::SwitchSession session(options);
      EXPECT_TRUE(session.GetPipelineCookie().ok());
      size_t links = 0;
      for (const core::Link& l : t.links)
        links += (l.a == t.switches[i].id || l.b == t.switches[i].id);
      EXPECT_EQ(s.at("ports").size(), links);
    }
    for (size_t i = 0; i < t.hosts.size(); ++i) {
      EXPECT_EQ(lab_topology.hosts[i].address,
                core::FormatIpv4(core::NodeAddress(t, t.hosts[i].id)));
    }
    const Json root = ShellJson("ip -j link show");
    for (const Json& name : lab.at("root_interfaces")) {
      bool found = false;
      for (const Json& l : root) found = found || l.at("ifname") == name;
      EXPECT_TRUE(found) << name;
    }
  }

  // Nothing of the lab is left: no namespace or interface with its prefix, no process.
  void ExpectGone(const Json& lab) {
    const std::string prefix = lab.at("prefix");
    ASSERT_FALSE(prefix.empty());
    const std::string netns = Shell("ip netns list");
    EXPECT_FALSE(absl::StrContains(netns, prefix)) << netns;
    const Json links = ShellJson("ip -j link show");
    ASSERT_TRUE(links.is_array());
    for (const Json& l : links) {
      EXPECT_FALSE(absl::StartsWith(l.at("ifname").get<std::string>(), prefix)) << l.dump();
    }
    for (const Json& p : lab.at("processes")) {
      EXPECT_FALSE(ProcessRuns(p.at("pid").get<pid_t>())) << p.dump();
    }
  }

  void UpCheckDown(const core::Topology& t) {
    const Json lab = Up(t);
    ExpectUp(t, lab);
    ASSERT_EQ(lab.at("processes").size(), t.switches.size());
    const CliRun down = RunInac("lab down --dir " + dir_, dir_);
    EXPECT_EQ(down.exit, 0) << down.out;
    ExpectGone(lab);
    EXPECT_EQ(LabJson().at("state"), "down");
    const CliRun again = RunInac("lab down --dir " + dir_, dir_);
    EXPECT_EQ(again.exit, 0) << again.out;
  }

  std::string dir_;
};

TEST_F(LabTest, OneSwitchThreeHosts) { UpCheckDown(Star()); }

TEST_F(LabTest, LeafSpineTwoLeavesOneSpine) { UpCheckDown(LeafSpine(2, 1, 2)); }

TEST_F(LabTest, ControllerProgramsEveryBmv2) {
  const core::Topology t = LeafSpine(2, 1, 2);
  const Json lab = Up(t, "");
  ASSERT_TRUE(lab.is_object());
  ASSERT_TRUE(lab.at("controller_url").is_string()) << lab.dump(2);
  ASSERT_EQ(lab.at("processes").size(), t.switches.size() + 1);
  std::string url = lab.at("controller_url");
  Rest rest(url.substr(std::string("http://").size()));
  Response last;
  bool synced = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
       !synced && std::chrono::steady_clock::now() < end;) {
    last = rest.Get("/switches");
    if (last.status == 200 && last.body.at("switches").size() == t.switches.size()) {
      synced = true;
      for (const Json& s : last.body.at("switches")) {
        synced = synced && s.value("connected", false) && s.value("in_sync", false) &&
                 s.value("pipeline_pushes", 0) >= 1;
      }
    }
    if (!synced) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(synced) << last.status << " " << last.body.dump(2) << "\n"
                      << LogTail(dir_ + "/serve.log");
  const CliRun down = RunInac("lab down --dir " + dir_, dir_);
  EXPECT_EQ(down.exit, 0) << down.out;
  ExpectGone(lab);
}

TEST_F(LabTest, FailedUpRemovesWhatItCreated) {
  // A "BMv2" that exits at once: namespaces and veths exist by then and must go again.
  const std::string file = WriteFile(dir_ + "/input.json", core::TopologyToJson(Star()).dump());
  const CliRun run = RunInac(
      "lab up --no-controller --bmv2 /bin/false --topology " + file + " --dir " + dir_, dir_);
  EXPECT_EQ(run.exit, 1) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "switch s0: BMv2 exited")) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, dir_ + "/s0.bmv2.log")) << run.out;
  const Json lab = LabJson();
  ASSERT_TRUE(lab.is_object());
  EXPECT_EQ(lab.at("state"), "down");
  ExpectGone(lab);
  const CliRun down = RunInac("lab down --dir " + dir_, dir_);
  EXPECT_EQ(down.exit, 0) << down.out;
}

TEST_F(LabTest, DownSucceedsWhenPartsAreAlreadyGone) {
  const core::Topology t = LeafSpine(2, 1, 2);
  const Json lab = Up(t);
  ASSERT_TRUE(lab.is_object());
  // Someone deleted a namespace and a BMv2 died.
  Shell("ip netns del " + lab.at("hosts")[0].at("namespace").get<std::string>());
  kill(lab.at("switches")[0].at("pid").get<pid_t>(), SIGKILL);
  const CliRun down = RunInac("lab down --dir " + dir_, dir_);
  EXPECT_EQ(down.exit, 0) << down.out;
  ExpectGone(lab);
  // `up` again in the same folder: same names, all fresh.
  const Json again = Up(t);
  ExpectUp(t, again);
  EXPECT_EQ(again.at("prefix"), lab.at("prefix"));
}

}  // namespace
}  // namespace inac::systest
