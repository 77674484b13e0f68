// The topology codec of core/json.h, and the link status names.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/json_fields.h"

namespace inac::core {

namespace {

using json_fields::Indexed;
using json_fields::Reader;

}  // namespace

std::string_view LinkStatusName(LinkStatus status) {
  return status == LinkStatus::kUp ? "up" : "down";
}

std::optional<LinkStatus> ParseLinkStatus(std::string_view name) {
  if (name == "up") return LinkStatus::kUp;
  if (name == "down") return LinkStatus::kDown;
  return std::nullopt;
}

Json TopologyToJson(const Topology& t) {
  Json switches = Json::array();
  for (const Switch& s : t.switches) {
    Json j = {{"id", s.id},
              {"ina",
               {{"capable", s.ina.capable},
                {"processing_gbps", s.ina.processing_gbps},
                {"aggregators", s.ina.aggregators},
                {"aggregator_bytes", s.ina.aggregator_bytes}}}};
    if (s.p4runtime) {
      j["p4runtime"] = {{"address", s.p4runtime->address},
                        {"device_id", s.p4runtime->device_id},
                        {"target", TargetKindName(s.p4runtime->target)}};
    }
    switches.push_back(std::move(j));
  }
  Json hosts = Json::array();
  for (const Host& h : t.hosts) {
    Json j = {{"id", h.id}};
    if (h.ingress_gbps) j["ingress_gbps"] = *h.ingress_gbps;
    if (h.address) j["address"] = *h.address;
    hosts.push_back(std::move(j));
  }
  Json links = Json::array();
  for (const Link& l : t.links) {
    Json j = {{"id", l.id}, {"a", l.a}, {"b", l.b}, {"gbps", l.gbps}};
    if (l.latency_us) j["latency_us"] = *l.latency_us;
    j["status"] = std::string(LinkStatusName(l.status));
    if (l.a_port) j["a_port"] = *l.a_port;
    if (l.b_port) j["b_port"] = *l.b_port;
    links.push_back(std::move(j));
  }
  return {{"switches", switches}, {"hosts", hosts}, {"links", links}};
}

namespace {

// One element of "switches"; `path` is its JSON path.
Switch ReadSwitch(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  Reader s(json, path, problems);
  Switch sw;
  if (!s.ok()) return sw;
  s.String("id", &sw.id, true);
  if (const Json* ina = s.Object("ina", false)) {
    Reader ri(*ina, s.At("ina"), problems);
    ri.Bool("capable", &sw.ina.capable, false);
    ri.Number("processing_gbps", &sw.ina.processing_gbps, sw.ina.capable);
    ri.Int("aggregators", &sw.ina.aggregators, false);
    ri.Int32("aggregator_bytes", &sw.ina.aggregator_bytes, false);
  }
  if (const Json* p4 = s.Object("p4runtime", false)) {
    Reader rp(*p4, s.At("p4runtime"), problems);
    P4RuntimeEndpoint ep;
    rp.String("address", &ep.address, true);
    rp.Uint("device_id", &ep.device_id, true);
    std::string target;
    if (rp.String("target", &target, false)) {
      if (auto kind = ParseTargetKind(target)) {
        ep.target = *kind;
      } else {
        rp.Add(rp.At("target"), absl::StrCat("must be \"emulator\", \"bmv2\" or \"tofino\", got ",
                                             QuoteForMessage(target)));
      }
    }
    sw.p4runtime = ep;
  }
  return sw;
}

// One element of "hosts".
Host ReadHost(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  Reader h(json, path, problems);
  Host host;
  if (!h.ok()) return host;
  h.String("id", &host.id, true);
  h.OptNumber("ingress_gbps", &host.ingress_gbps);
  h.OptString("address", &host.address);
  return host;
}

// One element of "links"; the id defaults to DefaultLinkId(a, b).
Link ReadLink(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  Reader l(json, path, problems);
  Link link;
  if (!l.ok()) return link;
  l.String("a", &link.a, true);
  l.String("b", &link.b, true);
  if (!l.String("id", &link.id, false)) link.id = DefaultLinkId(link.a, link.b);
  l.Number("gbps", &link.gbps, true);
  l.OptNumber("latency_us", &link.latency_us);
  std::string status;
  if (l.String("status", &status, false)) {
    auto st = ParseLinkStatus(status);
    if (st) {
      link.status = *st;
    } else {
      l.Add(l.At("status"),
            absl::StrCat("must be \"up\" or \"down\", got ", QuoteForMessage(status)));
    }
  }
  uint64_t port = 0;
  if (l.Uint("a_port", &port, false))
    link.a_port = static_cast<uint32_t>(std::min<uint64_t>(port, 1u << 20));
  if (l.Uint("b_port", &port, false))
    link.b_port = static_cast<uint32_t>(std::min<uint64_t>(port, 1u << 20));
  return link;
}

}  // namespace

Topology TopologyFromJson(const Json& json, std::vector<Problem>* problems) {
  Topology t;
  Reader r(json, "", problems);
  if (!r.ok()) return t;
  if (const Json* arr = r.Array("switches", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      t.switches.push_back(ReadSwitch((*arr)[i], Indexed("", "switches", i), problems));
    }
  }
  if (const Json* arr = r.Array("hosts", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      t.hosts.push_back(ReadHost((*arr)[i], Indexed("", "hosts", i), problems));
    }
  }
  if (const Json* arr = r.Array("links", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      t.links.push_back(ReadLink((*arr)[i], Indexed("", "links", i), problems));
    }
  }
  return t;
}

std::optional<Topology> ParseTopology(std::string_view text, std::vector<Problem>* problems) {
  size_t before = problems->size();
  auto json = ParseJsonText(text, problems);
  if (!json) return std::nullopt;
  Topology t = TopologyFromJson(*json, problems);
  const bool structural = problems->size() != before;
  std::vector<Problem> semantic = ValidateTopology(t);
  if (structural) {
    // Semantic checks still run on what decoded, so one pass reports both kinds; a problem inside
    // an element that already failed to decode (same top-level element, e.g. "links[3]") would
    // only echo it and is left out. A whole-document problem leaves nothing to check.
    auto element = [](const std::string& path) {
      const size_t bracket = path.find(']');
      const size_t dot = path.find('.');
      if (bracket != std::string::npos && (dot == std::string::npos || bracket < dot)) {
        return path.substr(0, bracket + 1);
      }
      return dot == std::string::npos ? path : path.substr(0, dot);
    };
    std::set<std::string> broken;
    for (size_t i = before; i < problems->size(); ++i) broken.insert(element((*problems)[i].path));
    if (broken.contains("")) return std::nullopt;
    for (const Problem& p : semantic) {
      if (!broken.contains(element(p.path))) problems->push_back(p);
    }
    return std::nullopt;
  }
  if (!semantic.empty()) {
    problems->insert(problems->end(), semantic.begin(), semantic.end());
    return std::nullopt;
  }
  return t;
}

}  // namespace inac::core
