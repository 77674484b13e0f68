#include "core/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace inac::core {

std::string FormatProblem(const Problem& problem) {
  if (problem.path.empty()) return problem.message;
  return absl::StrCat(problem.path, ": ", problem.message);
}

std::string FormatProblems(const std::vector<Problem>& problems) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < kMaxReportedProblems; ++i) {
    absl::StrAppend(&out, FormatProblem(problems[i]), "\n");
  }
  if (problems.size() > kMaxReportedProblems) {
    absl::StrAppend(&out, "... and ", problems.size() - kMaxReportedProblems, " more problems\n");
  }
  return out;
}

absl::Status ProblemsError(const std::vector<Problem>& problems) {
  return WithField(absl::InvalidArgumentError(FormatProblems(problems)),
                   problems.empty() ? "" : problems.front().path);
}

namespace {

// Abseil here has its own string_view.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A byte for a message: 'c' when printable ASCII, else \xNN.
std::string ShowByte(unsigned char c) {
  if (c >= 0x20 && c < 0x7F) return absl::StrCat("'", std::string(1, static_cast<char>(c)), "'");
  return absl::StrFormat("\\x%02x", c);
}

}  // namespace

std::string IdProblem(std::string_view id, size_t max_bytes) {
  if (id.empty()) return "must not be empty";
  if (id.size() > max_bytes) {
    return absl::StrCat("longer than ", max_bytes, " bytes (got ", id.size(), ")");
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    const bool alnum = absl::ascii_isalnum(c);
    if (alnum || (i > 0 && kIdPunctuation.find(static_cast<char>(c)) != std::string_view::npos)) {
      continue;
    }
    return absl::StrCat("invalid character ", ShowByte(c), " at byte ", i,
                        " (ids use letters, digits and ", Sv(kIdPunctuation),
                        ", starting with a letter or digit)");
  }
  return "";
}

std::string EscapeForLog(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c > 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

std::string QuoteForMessage(std::string_view text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return absl::StrCat("\"", Sv(text), "\"");
  // Cut before a continuation byte's character, so the message stays valid UTF-8.
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat("\"", Sv(text.substr(0, cut)), "...\"");
}

std::string TextProblem(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::StrCat("longer than ", max_bytes, " bytes (got ", text.size(), ")");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // C0 controls and DEL; C1 controls (U+0080..U+009F) are 0xC2 0x80..0x9F in UTF-8.
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      return absl::StrCat("control character ",
                          c1 ? absl::StrFormat("U+%04X", static_cast<unsigned char>(text[i + 1]))
                             : absl::StrFormat("U+%04X", c),
                          " at byte ", i);
    }
  }
  return "";
}

namespace {

std::string Quote(const std::string& s) { return QuoteForMessage(s); }

std::string Index(const std::string& prefix, const char* field, size_t i) {
  return absl::StrCat(prefix, field, "[", i, "]");
}

// Checks a capacity: finite, in [kMinGbps, kMaxGbps] (or exactly 0 when `allow_zero`).
void CheckGbps(double v, const std::string& path, bool allow_zero, std::vector<Problem>* out) {
  if (std::isnan(v) || std::isinf(v)) {
    out->push_back({path, "must be a finite number"});
  } else if (v < 0 || (!allow_zero && v == 0)) {
    out->push_back(
        {path, absl::StrFormat("must be %s, got %g", allow_zero ? "non-negative" : "positive", v)});
  } else if (v > 0 && v < kMinGbps) {
    out->push_back({path, absl::StrFormat("%g Gbps is below the minimum of %g Gbps%s", v, kMinGbps,
                                          allow_zero ? " (or 0)" : "")});
  } else if (v > kMaxGbps) {
    out->push_back({path, absl::StrFormat("%g Gbps is absurd (limit %g)", v, kMaxGbps)});
  }
}

// Adds the problem of an id (IdProblem) at `path`; true when the id is fine.
bool CheckId(const std::string& id, size_t max_bytes, const std::string& path,
             std::vector<Problem>* out) {
  std::string problem = IdProblem(id, max_bytes);
  if (problem.empty()) return true;
  out->push_back({path, std::move(problem)});
  return false;
}

// Adds "at most N <what>" at `path` when `n` > `max`.
void CheckCount(size_t n, size_t max, const char* what, const std::string& path,
                std::vector<Problem>* out) {
  if (n > max) out->push_back({path, absl::StrCat("at most ", max, " ", what, ", got ", n)});
}

}  // namespace

std::vector<Problem> ValidateTopology(const Topology& t) {
  std::vector<Problem> out;
  std::unordered_map<std::string, std::string> node_path;  // id -> where it was first declared
  std::unordered_set<std::string> switch_ids;
  std::set<uint64_t> device_ids;
  CheckCount(t.switches.size(), kMaxSwitches, "switches", "switches", &out);
  CheckCount(t.hosts.size(), kMaxHosts, "hosts", "hosts", &out);
  CheckCount(t.links.size(), kMaxLinks, "links", "links", &out);
  for (size_t i = 0; i < t.switches.size(); ++i) {
    const Switch& s = t.switches[i];
    std::string p = Index("", "switches", i);
    // An id with a bad character is still a node, so links to it do not echo "unknown node".
    CheckId(s.id, kMaxIdBytes, p + ".id", &out);
    if (s.id.empty()) {
      // reported by CheckId
    } else if (!node_path.emplace(s.id, p).second) {
      out.push_back({p + ".id", absl::StrCat("duplicate node id ", Quote(s.id), " (first at ",
                                             node_path[s.id], ")")});
    } else {
      switch_ids.insert(s.id);
    }
    if (s.ina.capable) {
      CheckGbps(s.ina.processing_gbps, p + ".ina.processing_gbps", false, &out);
    } else {
      CheckGbps(s.ina.processing_gbps, p + ".ina.processing_gbps", true, &out);
    }
    if (s.ina.aggregators < 0 || s.ina.aggregators > kMaxAggregators) {
      out.push_back({p + ".ina.aggregators",
                     absl::StrCat("must be between 0 and 10^9, got ", s.ina.aggregators)});
    }
    if (s.ina.aggregator_bytes <= 0 || s.ina.aggregator_bytes % 4 != 0 ||
        s.ina.aggregator_bytes > kMaxAggregatorBytes) {
      out.push_back({p + ".ina.aggregator_bytes",
                     absl::StrCat("must be a positive multiple of 4 up to ", kMaxAggregatorBytes,
                                  ", got ", s.ina.aggregator_bytes)});
    }
    if (s.p4runtime) {
      const std::string& address = s.p4runtime->address;
      const bool printable =
          std::all_of(address.begin(), address.end(), [](char c) { return c > 0x20 && c < 0x7F; });
      if (address.size() > kMaxAddressBytes) {
        out.push_back(
            {p + ".p4runtime.address",
             absl::StrCat("longer than ", kMaxAddressBytes, " bytes (got ", address.size(), ")")});
      } else if (address.empty() || address.find(':') == std::string::npos || !printable) {
        out.push_back(
            {p + ".p4runtime.address",
             absl::StrCat("must be host:port (printable ASCII, no spaces), got ", Quote(address))});
      }
      if (s.p4runtime->target == TargetKind::kTofino) {
        out.push_back({p + ".p4runtime.target",
                       "\"tofino\" is not supported yet: no Tofino build of ina.p4 ships with INAC "
                       "(use \"bmv2\" or \"emulator\")"});
      }
      if (s.p4runtime->device_id == 0) {
        out.push_back({p + ".p4runtime.device_id", "must be positive"});
      } else if (!device_ids.insert(s.p4runtime->device_id).second) {
        out.push_back({p + ".p4runtime.device_id",
                       absl::StrCat("duplicate device id ", s.p4runtime->device_id)});
      }
    }
  }
  std::map<uint32_t, std::string> addresses;
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    const Host& h = t.hosts[i];
    std::string p = Index("", "hosts", i);
    CheckId(h.id, kMaxIdBytes, p + ".id", &out);
    if (h.id.empty()) {
      // reported by CheckId
    } else if (!node_path.emplace(h.id, p).second) {
      out.push_back({p + ".id", absl::StrCat("duplicate node id ", Quote(h.id), " (first at ",
                                             node_path[h.id], ")")});
    }
    if (h.ingress_gbps) CheckGbps(*h.ingress_gbps, p + ".ingress_gbps", false, &out);
    if (h.address) {
      auto a = h.address->size() <= kMaxIpv4Bytes ? ParseIpv4(*h.address) : std::nullopt;
      if (!a) {
        out.push_back({p + ".address", absl::StrCat("not an IPv4 address: ", Quote(*h.address))});
      } else if (!addresses.emplace(*a, p).second) {
        out.push_back({p + ".address", absl::StrCat("duplicate address ", *h.address, " (first at ",
                                                    addresses[*a], ")")});
      }
    }
  }

  std::set<std::string> link_ids;
  std::unordered_map<std::string, int> degree;
  std::map<std::string, std::set<uint32_t>> explicit_ports;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const Link& l = t.links[i];
    std::string p = Index("", "links", i);
    if (CheckId(l.id, kMaxLinkIdBytes, p + ".id", &out) && !link_ids.insert(l.id).second) {
      out.push_back({p + ".id", absl::StrCat("duplicate link id ", Quote(l.id))});
    }
    bool a_ok = node_path.count(l.a) > 0;
    bool b_ok = node_path.count(l.b) > 0;
    if (!a_ok) out.push_back({p + ".a", absl::StrCat("unknown node ", Quote(l.a))});
    if (!b_ok) out.push_back({p + ".b", absl::StrCat("unknown node ", Quote(l.b))});
    if (a_ok && b_ok && l.a == l.b) {
      out.push_back({p + ".b", absl::StrCat("link connects ", Quote(l.a), " to itself")});
    }
    if (a_ok && b_ok && !switch_ids.count(l.a) && !switch_ids.count(l.b)) {
      out.push_back(
          {p, absl::StrCat("links two hosts (", l.a, ", ", l.b, "); hosts attach to switches")});
    }
    CheckGbps(l.gbps, p + ".gbps", false, &out);
    if (l.latency_us &&
        (std::isnan(*l.latency_us) || *l.latency_us < 0 || *l.latency_us > kMaxLatencyUs)) {
      out.push_back({p + ".latency_us", "must be between 0 and 10^7"});
    }
    degree[l.a]++;
    degree[l.b]++;
    if (l.a_port) {
      if (*l.a_port == 0 || *l.a_port > kMaxPort) {
        out.push_back({p + ".a_port", absl::StrCat("must be in 1..", kMaxPort)});
      }
      if (!switch_ids.count(l.a)) out.push_back({p + ".a_port", "only switches have ports"});
      if (!explicit_ports[l.a].insert(*l.a_port).second) {
        out.push_back(
            {p + ".a_port", absl::StrCat("port ", *l.a_port, " of ", l.a, " used twice")});
      }
    }
    if (l.b_port) {
      if (*l.b_port == 0 || *l.b_port > kMaxPort) {
        out.push_back({p + ".b_port", absl::StrCat("must be in 1..", kMaxPort)});
      }
      if (!switch_ids.count(l.b)) out.push_back({p + ".b_port", "only switches have ports"});
      if (!explicit_ports[l.b].insert(*l.b_port).second) {
        out.push_back(
            {p + ".b_port", absl::StrCat("port ", *l.b_port, " of ", l.b, " used twice")});
      }
    }
  }
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    if (!t.hosts[i].id.empty() && degree[t.hosts[i].id] == 0) {
      out.push_back(
          {Index("", "hosts", i), absl::StrCat("host ", Quote(t.hosts[i].id), " has no link")});
    }
  }
  if (!out.empty()) return out;  // connectivity needs a well-formed graph

  if (t.switches.empty() && t.hosts.empty()) {
    out.push_back({"", "topology has no nodes"});
    return out;
  }
  // Connectivity over all links, whatever their status: a down link is still part of the fabric.
  Topology all_up = t;
  for (Link& l : all_up.links) l.status = LinkStatus::kUp;
  Graph g(all_up);
  std::vector<bool> seen = g.Reachable(0);
  std::vector<std::string> unreachable;
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (!seen[n]) unreachable.push_back(g.name(n));
  }
  if (!unreachable.empty()) {
    std::string list;
    for (size_t i = 0; i < unreachable.size() && i < 5; ++i) {
      absl::StrAppend(&list, i ? ", " : "", unreachable[i]);
    }
    if (unreachable.size() > 5) absl::StrAppend(&list, ", ...");
    out.push_back({"", absl::StrCat("topology is disconnected: ", unreachable.size(),
                                    " node(s) unreachable from ", g.name(0), " (", list, ")")});
  }
  return out;
}

std::vector<Problem> ValidateJobSpec(const JobSpec& spec, const Topology* topology,
                                     const std::string& path) {
  std::vector<Problem> out;
  auto at = [&](const std::string& field) { return path.empty() ? field : path + "." + field; };
  if (spec.name.empty()) {
    out.push_back({at("name"), "must not be empty"});
  } else if (std::string problem = TextProblem(spec.name, kMaxJobNameBytes); !problem.empty()) {
    out.push_back({at("name"), std::move(problem)});
  }
  CheckId(spec.tenant, kMaxTenantBytes, at("tenant"), &out);
  if (spec.priority < -kMaxPriority || spec.priority > kMaxPriority) {
    out.push_back({at("priority"), "must be between -10^6 and 10^6"});
  }
  if (spec.workers.empty()) out.push_back({at("workers"), "a job needs at least one worker"});
  CheckCount(spec.workers.size(), kMaxWorkersPerJob, "workers", at("workers"), &out);
  // References that are not even ids are not looked up in the topology (no second problem).
  std::vector<char> bad_worker(spec.workers.size()), bad_server(spec.parameter_servers.size());
  std::set<std::string> workers;
  for (size_t i = 0; i < spec.workers.size(); ++i) {
    const std::string p = at(Index("", "workers", i));
    bad_worker[i] = !CheckId(spec.workers[i], kMaxIdBytes, p, &out);
    if (!workers.insert(spec.workers[i]).second) {
      out.push_back({p, absl::StrCat("duplicate worker ", Quote(spec.workers[i]))});
    }
  }
  std::set<std::string> servers;
  for (size_t i = 0; i < spec.parameter_servers.size(); ++i) {
    const std::string& ps = spec.parameter_servers[i];
    std::string p = at(Index("", "parameter_servers", i));
    bad_server[i] = !CheckId(ps, kMaxIdBytes, p, &out);
    if (!servers.insert(ps).second) {
      out.push_back({p, absl::StrCat("duplicate parameter server ", Quote(ps))});
    }
    if (workers.count(ps)) {
      out.push_back({p, absl::StrCat("host ", Quote(ps),
                                     " is both a worker and a parameter server of this job")});
    }
  }
  if (spec.parameter_servers.size() > static_cast<size_t>(kMaxParameterServersPerJob)) {
    out.push_back({at("parameter_servers"), absl::StrCat("at most ", kMaxParameterServersPerJob,
                                                         " parameter servers per job")});
  }
  if (spec.allreduce == AllReduce::kPs && spec.parameter_servers.empty()) {
    out.push_back(
        {at("parameter_servers"), "allreduce \"ps\" needs at least one parameter server"});
  }
  if (spec.allreduce == AllReduce::kRing && !spec.parameter_servers.empty()) {
    out.push_back({at("parameter_servers"), "allreduce \"ring\" takes no parameter servers"});
  }
  if (spec.allreduce == AllReduce::kRing && spec.workers.size() < 2) {
    out.push_back({at("workers"), "ring all-reduce needs at least two workers"});
  }
  if (spec.gradient_bytes <= 0) {
    out.push_back(
        {at("gradient_bytes"), absl::StrCat("must be positive, got ", spec.gradient_bytes)});
  } else if (spec.gradient_bytes > kMaxGradientBytes) {
    out.push_back({at("gradient_bytes"), "larger than 4 TiB"});
  }
  if (std::isnan(spec.compute_ms) || std::isinf(spec.compute_ms) || spec.compute_ms < 0) {
    out.push_back({at("compute_ms"), "must be a finite non-negative number"});
  } else if (spec.compute_ms > kMaxComputeMs) {
    out.push_back({at("compute_ms"), "longer than 10^8 ms per iteration"});
  }
  if (spec.iterations <= 0) {
    out.push_back({at("iterations"), absl::StrCat("must be positive, got ", spec.iterations)});
  } else if (spec.iterations > kMaxIterations) {
    out.push_back({at("iterations"), "more than 10^9 iterations"});
  }
  auto check_batch = [&](int batch, const std::string& p) {
    if (batch <= 0) {
      out.push_back({p, absl::StrCat("must be positive, got ", batch)});
    } else if (batch > kMaxBatchSize) {
      out.push_back({p, absl::StrCat("larger than ", kMaxBatchSize, " (2^20), got ", batch)});
    }
  };
  check_batch(spec.batch_size, at("batch_size"));
  CheckCount(spec.batch_sizes.size(), kMaxBatchSizeChoices, "batch sizes", at("batch_sizes"), &out);
  for (size_t i = 0; i < spec.batch_sizes.size(); ++i) {
    check_batch(spec.batch_sizes[i], at(Index("", "batch_sizes", i)));
  }
  if (!spec.batch_sizes.empty() && spec.batch_size > 0 &&
      std::find(spec.batch_sizes.begin(), spec.batch_sizes.end(), spec.batch_size) ==
          spec.batch_sizes.end()) {
    out.push_back({at("batch_size"),
                   absl::StrCat("batch_size ", spec.batch_size, " is not one of batch_sizes")});
  }
  // Convergence inputs of batch-size adjustment (InGo, docs/batch-size.md).
  auto check_positive = [&](const std::optional<double>& v, const char* field, bool zero_ok) {
    if (v && (!std::isfinite(*v) || *v < 0 || (!zero_ok && *v == 0) || *v > 1e15)) {
      out.push_back({at(field), zero_ok ? "must be a finite number in [0, 10^15]"
                                        : "must be a finite number in (0, 10^15]"});
    }
  };
  check_positive(spec.steps_min, "steps_min", false);
  check_positive(spec.noise_scale, "noise_scale", true);
  check_positive(spec.target_epochs, "target_epochs", false);
  if (spec.dataset_size && *spec.dataset_size < 1) {
    out.push_back({at("dataset_size"), "must be at least 1"});
  }
  if (spec.target_epochs.has_value() != spec.dataset_size.has_value()) {
    out.push_back({at(spec.target_epochs ? "dataset_size" : "target_epochs"),
                   "target_epochs and dataset_size go together"});
  }
  if (topology == nullptr) return out;

  bool refs_ok = true;
  auto check_host = [&](const std::string& id, const std::string& p) {
    if (topology->FindHost(id)) return;
    refs_ok = false;
    if (topology->FindSwitch(id)) {
      out.push_back(
          {p, absl::StrCat(Quote(id), " is a switch, not a host"), ProblemKind::kUnknownNode});
    } else {
      out.push_back({p, absl::StrCat("unknown host ", Quote(id)), ProblemKind::kUnknownNode});
    }
  };
  for (size_t i = 0; i < spec.workers.size(); ++i) {
    if (bad_worker[i]) {
      refs_ok = false;
    } else {
      check_host(spec.workers[i], at(Index("", "workers", i)));
    }
  }
  for (size_t i = 0; i < spec.parameter_servers.size(); ++i) {
    if (bad_server[i]) {
      refs_ok = false;
    } else {
      check_host(spec.parameter_servers[i], at(Index("", "parameter_servers", i)));
    }
  }
  if (!refs_ok || spec.workers.empty()) return out;
  Graph g(*topology);
  std::vector<bool> seen = g.Reachable(g.index(spec.workers[0]));
  auto check_reach = [&](const std::string& id, const std::string& p) {
    if (!seen[g.index(id)]) {
      out.push_back({p,
                     absl::StrCat("host ", Quote(id), " is not connected to ", spec.workers[0],
                                  " over links that are up"),
                     ProblemKind::kUnreachable});
    }
  };
  for (size_t i = 1; i < spec.workers.size(); ++i) {
    check_reach(spec.workers[i], at(Index("", "workers", i)));
  }
  for (size_t i = 0; i < spec.parameter_servers.size(); ++i) {
    check_reach(spec.parameter_servers[i], at(Index("", "parameter_servers", i)));
  }
  return out;
}

}  // namespace inac::core
