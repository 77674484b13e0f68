#include "northbound/rest_json.h"

namespace inac::northbound::rest {

using core::Json;

Json SwitchJson(const server::SwitchStatus& s) {
  Json j = Json::object();
  j["id"] = s.id;
  j["managed"] = s.managed;
  if (s.managed) {
    j["p4runtime"] = {{"address", s.address}, {"device_id", s.device_id}, {"target", s.target}};
  }
  j["connected"] = s.connected;
  j["primary"] = s.primary;
  j["election_id"] = s.election_id;
  j["pipeline_pushes"] = s.pipeline_pushes;
  j["intent_version"] = s.intent_version;
  j["applied_version"] = s.applied_version;
  j["in_sync"] = s.managed && s.applied_version == s.intent_version && s.last_error.empty();
  j["entries"] = s.entries;
  j["last_error"] = s.last_error;
  j["last_contact_ms"] = s.last_contact_ms;
  j["aggregators"] = {{"used", s.aggregators_used}, {"total", s.aggregators_total}};
  Json tables = Json::array();
  for (const server::TableOccupancy& t : s.tables) {
    tables.push_back({{"name", t.name}, {"entries", t.entries}, {"size", t.size}});
  }
  j["tables"] = std::move(tables);
  return j;
}

Json EventJson(const core::Event& e) {
  Json j = Json::object();
  j["seq"] = e.seq;
  j["time_ms"] = e.time_ms;
  j["kind"] = e.kind;
  if (e.job_id) j["job_id"] = *e.job_id;
  j["message"] = e.message;
  std::vector<core::Problem> ignored;
  auto data = core::ParseJsonText(e.data_json, &ignored);
  j["data"] = data ? *data : Json::object();
  return j;
}

Json ConfigJson(const server::JobConfig& c) {
  Json j = Json::object();
  j["job_id"] = c.job.id;
  j["state"] = std::string(core::JobStateName(c.job.state));
  j["plan_version"] = c.plan_version;
  j["generation"] = c.generation;
  j["algorithm"] = c.algorithm;
  j["batch_size"] = c.batch_size;
  j["gradient_bytes"] = c.job.spec.gradient_bytes;
  j["priority"] = c.priority;
  j["dataplane_priority"] = c.dataplane_priority;
  j["rate_gbps"] = c.rate_gbps;
  j["iteration_ms"] = c.iteration_ms;
  Json shards = Json::array();
  for (const auto& s : c.shards) {
    shards.push_back({{"ps", s.ps},
                      {"ps_address", core::FormatIpv4(s.ps_address)},
                      {"share", s.share},
                      {"tag", s.tag},
                      {"multicast_group", s.multicast_group}});
  }
  j["parameter_servers"] = shards;
  Json routes = Json::array();
  for (const auto& r : c.routes) {
    routes.push_back({{"worker", r.worker},
                      {"ps", r.ps},
                      {"aggregation_node", r.aggregation_node},
                      {"fraction", r.fraction}});
  }
  j["workers"] = routes;
  Json regions = Json::array();
  for (const auto& r : c.regions) {
    regions.push_back({{"switch", r.switch_id},
                       {"tag", r.tag},
                       {"aggregator_base", r.aggregator_base},
                       {"aggregator_count", r.aggregator_count},
                       {"slot_offset", r.slot_offset},
                       {"window", r.window}});
  }
  j["aggregator_regions"] = regions;
  Json tags = Json::array();
  for (const auto& t : c.tags) {
    Json members = Json::array();
    for (const auto& m : t.members) {
      members.push_back({{"worker", m.worker},
                         {"address", core::FormatIpv4(m.address)},
                         {"aggregation_node", m.aggregation_node}});
    }
    Json aggregators = Json::array();
    for (const auto& a : t.aggregators) {
      aggregators.push_back({{"switch", a.switch_id},
                             {"address", core::FormatIpv4(a.address)},
                             {"inputs", a.inputs},
                             {"aggregator_base", a.aggregator_base},
                             {"aggregator_count", a.aggregator_count},
                             {"slot_offset", a.slot_offset},
                             {"window", a.window}});
    }
    tags.push_back({{"tag", t.tag},
                    {"ps", t.ps},
                    {"ps_address", core::FormatIpv4(t.ps_address)},
                    {"share", t.share},
                    {"range", {t.begin, t.end}},
                    {"multicast_group", t.multicast_group},
                    {"members", members},
                    {"aggregators", aggregators}});
  }
  j["tags"] = tags;
  if (!c.ring.empty()) j["ring"] = c.ring;
  if (!c.ring_roles.empty()) {
    Json roles = Json::array();
    for (const core::RingRole& r : c.ring_roles) {
      Json e = {{"worker", r.worker}, {"role", r.role}};
      if (!r.prev.empty()) {
        e["prev"] = {{"id", r.prev}, {"address", core::FormatIpv4(r.prev_address)}};
        e["next"] = {{"id", r.next}, {"address", core::FormatIpv4(r.next_address)}};
      }
      if (!r.agent.empty()) {
        e["agent"] = r.agent;
        e["tor"] = r.tor;
        e["rack_tag"] = r.rack_tag;
      }
      roles.push_back(std::move(e));
    }
    j["ring_roles"] = std::move(roles);
  }
  return j;
}

Json InaCountersJson(const std::vector<server::InaCounterSample>& samples) {
  Json list = Json::array();
  int64_t aggregated = 0, fallback = 0, preempted = 0;
  for (const server::InaCounterSample& c : samples) {
    list.push_back({{"switch", c.switch_id},
                    {"tag", c.tag},
                    {"aggregated_packets", c.aggregated_packets},
                    {"fallback_packets", c.fallback_packets},
                    {"preempted_packets", c.preempted_packets},
                    {"read_ms", c.read_ms}});
    aggregated += c.aggregated_packets;
    fallback += c.fallback_packets;
    preempted += c.preempted_packets;
  }
  Json j = Json::object();
  j["switches"] = list;
  j["aggregated_packets"] = aggregated;
  j["fallback_packets"] = fallback;
  j["preempted_packets"] = preempted;
  return j;
}

Json DataPathJson(const server::JobDataPath& d) {
  Json workers = Json::array();
  for (const server::DataPathReport& w : d.workers) {
    workers.push_back({{"worker", w.worker},
                       {"path", std::string(server::DataPathKindName(w.path))},
                       {"reason", w.reason},
                       {"allreduces", w.allreduces},
                       {"fallbacks", w.fallbacks},
                       {"updated_ms", w.updated_ms}});
  }
  Json j = Json::object();
  j["state"] = d.state;
  j["summary"] = d.summary;
  j["allreduces"] = d.allreduces;
  j["fallbacks"] = d.fallbacks;
  j["workers"] = std::move(workers);
  return j;
}

}  // namespace inac::northbound::rest
