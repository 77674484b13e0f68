// The plan, job plan and switch intent codecs of core/json.h.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/json_fields.h"

namespace inac::core {

namespace {

using json_fields::AddressJson;
using json_fields::Indexed;
using json_fields::Join;
using json_fields::ProblemsToStatus;
using json_fields::ReadAddress;
using json_fields::Reader;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Plans

Json JobPlanToJson(const JobPlan& p) {
  Json j = Json::object();
  j["job_id"] = p.job_id;
  Json& shares = j["ps_shares"] = Json::object();
  for (const auto& [ps, x] : p.ps_shares) shares[ps] = x;
  Json& flows = j["flows"] = Json::array();
  for (const FlowPlan& f : p.flows) {
    Json e = Json::object();
    e["worker"] = f.worker;
    e["ps"] = f.ps;
    e["aggregation_node"] = f.aggregation_node;
    e["path"] = f.path;
    if (f.fraction != 1) e["fraction"] = f.fraction;
    flows.push_back(std::move(e));
  }
  Json& aggs = j["aggregator_paths"] = Json::array();
  for (const AggregatorPlan& a : p.aggregator_paths) {
    Json e = Json::object();
    e["switch"] = a.switch_id;
    e["ps"] = a.ps;
    e["path"] = a.path;
    aggs.push_back(std::move(e));
  }
  Json& counts = j["aggregators"] = Json::object();
  for (const auto& [sw, n] : p.aggregators) counts[sw] = n;
  if (!p.ring.empty()) j["ring"] = p.ring;
  j["batch_size"] = p.batch_size;
  j["priority"] = p.priority;
  if (p.generation != 0) j["generation"] = p.generation;
  j["rate_gbps"] = p.rate_gbps;
  if (p.lp_bound_gbps) j["lp_bound_gbps"] = *p.lp_bound_gbps;
  j["comm_ms"] = p.comm_ms;
  j["iteration_ms"] = p.iteration_ms;
  return j;
}

namespace {

JobPlan ReadJobPlan(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  JobPlan p;
  Reader r(json, path, problems);
  if (!r.ok()) return p;
  r.Int("job_id", &p.job_id, true);
  if (const Json* shares = r.Object("ps_shares", false)) {
    for (auto it = shares->begin(); it != shares->end(); ++it) {
      if (!it->is_number()) {
        r.Add(Join(r.At("ps_shares"), it.key()), "expected a number");
        continue;
      }
      p.ps_shares[it.key()] = it->get<double>();
    }
  }
  if (const Json* arr = r.Array("flows", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader f((*arr)[i], Indexed(path, "flows", i), problems);
      FlowPlan fp;
      f.String("worker", &fp.worker, true);
      f.String("ps", &fp.ps, true);
      f.String("aggregation_node", &fp.aggregation_node, true);
      f.StringArray("path", &fp.path, true);
      f.Number("fraction", &fp.fraction, false);
      p.flows.push_back(std::move(fp));
    }
  }
  if (const Json* arr = r.Array("aggregator_paths", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader a((*arr)[i], Indexed(path, "aggregator_paths", i), problems);
      AggregatorPlan ap;
      a.String("switch", &ap.switch_id, true);
      a.String("ps", &ap.ps, true);
      a.StringArray("path", &ap.path, true);
      p.aggregator_paths.push_back(std::move(ap));
    }
  }
  if (const Json* counts = r.Object("aggregators", false)) {
    for (auto it = counts->begin(); it != counts->end(); ++it) {
      if (!it->is_number_integer()) {
        r.Add(Join(r.At("aggregators"), it.key()), "expected an integer");
        continue;
      }
      p.aggregators[it.key()] = it->get<int64_t>();
    }
  }
  r.StringArray("ring", &p.ring, false);
  r.Int32("batch_size", &p.batch_size, false);
  r.Int32("priority", &p.priority, false);
  int64_t generation = 0;
  r.Int("generation", &generation, false);
  if (generation < 0 || generation > UINT32_MAX) {
    r.Add(r.At("generation"), "must be in [0, 2^32)");
  } else {
    p.generation = static_cast<uint32_t>(generation);
  }
  r.Number("rate_gbps", &p.rate_gbps, false);
  r.OptNumber("lp_bound_gbps", &p.lp_bound_gbps);
  r.Number("comm_ms", &p.comm_ms, false);
  r.Number("iteration_ms", &p.iteration_ms, false);
  return p;
}

}  // namespace

absl::StatusOr<JobPlan> JobPlanFromJson(const Json& json) {
  std::vector<Problem> problems;
  JobPlan p = ReadJobPlan(json, "", &problems);
  if (!problems.empty()) return ProblemsToStatus("job plan", problems);
  return p;
}

Json PlanToJson(const Plan& plan) {
  Json jobs = Json::array();
  for (const JobPlan& j : plan.jobs) jobs.push_back(JobPlanToJson(j));
  Json j = Json::object();
  j["version"] = plan.version;
  j["algorithm"] = plan.algorithm;
  if (!plan.memory_policy.empty()) j["memory_policy"] = plan.memory_policy;
  if (!plan.fingerprint.empty()) j["fingerprint"] = plan.fingerprint;
  j["solve_ms"] = plan.solve_ms;
  j["jobs"] = std::move(jobs);
  return j;
}

absl::StatusOr<Plan> PlanFromJson(const Json& json) {
  std::vector<Problem> problems;
  Plan plan;
  {
    Reader r(json, "", &problems);
    if (r.ok()) {
      r.Int("version", &plan.version, true);
      r.String("algorithm", &plan.algorithm, false);
      r.String("memory_policy", &plan.memory_policy, false);
      r.String("fingerprint", &plan.fingerprint, false);
      r.Number("solve_ms", &plan.solve_ms, false);
      if (const Json* arr = r.Array("jobs", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          plan.jobs.push_back(ReadJobPlan((*arr)[i], Indexed("", "jobs", i), &problems));
        }
      }
    }
  }
  if (!problems.empty()) return ProblemsToStatus("plan", problems);
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Switch intents

Json SwitchIntentToJson(const SwitchIntent& s) {
  Json jobs = Json::array();
  for (const JobAggregationIntent& j : s.jobs) {
    jobs.push_back({{"tag", j.tag},
                    {"job_id", j.job_id},
                    {"fan_in", j.fan_in},
                    {"input_bitmap", j.input_bitmap},
                    {"multicast_group", j.multicast_group},
                    {"aggregator_base", j.aggregator_base},
                    {"aggregator_count", j.aggregator_count},
                    {"priority", j.priority},
                    {"upstream_address", AddressJson(j.upstream_address)},
                    {"self_address", AddressJson(j.self_address)},
                    {"slot_offset", j.slot_offset},
                    {"window", j.window},
                    {"upstream_slot_shift", j.upstream_slot_shift}});
  }
  Json inputs = Json::array();
  for (const AggregationInputIntent& i : s.inputs) {
    inputs.push_back({{"tag", i.tag},
                      {"job_id", i.job_id},
                      {"source_address", AddressJson(i.source_address)},
                      {"index", i.index}});
  }
  Json routes = Json::array();
  for (const RouteIntent& r : s.routes) {
    routes.push_back({{"tag", r.tag},
                      {"job_id", r.job_id},
                      {"source_address", AddressJson(r.source_address)},
                      {"destination_address", AddressJson(r.destination_address)},
                      {"egress_port", r.egress_port},
                      {"multicast_group", r.multicast_group},
                      {"class", RouteClassName(r.packet_class)}});
  }
  Json hosts = Json::array();
  for (const HostPortIntent& h : s.host_ports) {
    hosts.push_back({{"port", h.port}, {"mac", h.mac}, {"address", AddressJson(h.address)}});
  }
  Json groups = Json::array();
  for (const MulticastGroupIntent& g : s.multicast_groups) {
    groups.push_back(
        {{"group_id", g.group_id}, {"job_id", g.job_id}, {"egress_ports", g.egress_ports}});
  }
  return {{"switch_id", s.switch_id}, {"version", s.version}, {"jobs", jobs},
          {"inputs", inputs},         {"routes", routes},     {"multicast_groups", groups},
          {"host_ports", hosts}};
}

namespace {

// A required unsigned field of at most 32 bits.
void ReadU32(Reader& r, const char* field, uint32_t* out) {
  uint64_t v = 0;
  if (!r.Uint(field, &v, true)) return;
  if (v > 0xFFFFFFFFull) {
    r.Add(r.At(field), "out of 32-bit range");
    return;
  }
  *out = static_cast<uint32_t>(v);
}

JobAggregationIntent ReadJobIntent(const Json& json, const std::string& path,
                                   std::vector<Problem>* problems) {
  Reader e(json, path, problems);
  JobAggregationIntent j;
  ReadU32(e, "tag", &j.tag);
  e.Int("job_id", &j.job_id, true);
  ReadU32(e, "fan_in", &j.fan_in);
  e.Uint("input_bitmap", &j.input_bitmap, true);
  ReadU32(e, "multicast_group", &j.multicast_group);
  ReadU32(e, "aggregator_base", &j.aggregator_base);
  ReadU32(e, "aggregator_count", &j.aggregator_count);
  int prio = 0;
  e.Int32("priority", &prio, true);
  j.priority = prio;
  ReadAddress(e, "upstream_address", &j.upstream_address);
  // Absent in intents stored before the contract carried them.
  if (e.Has("self_address")) ReadAddress(e, "self_address", &j.self_address);
  if (e.Has("slot_offset")) ReadU32(e, "slot_offset", &j.slot_offset);
  if (e.Has("window")) ReadU32(e, "window", &j.window);
  if (e.Has("upstream_slot_shift")) {
    e.Int32("upstream_slot_shift", &j.upstream_slot_shift, true);
  }
  return j;
}

AggregationInputIntent ReadInputIntent(const Json& json, const std::string& path,
                                       std::vector<Problem>* problems) {
  Reader e(json, path, problems);
  AggregationInputIntent in;
  ReadU32(e, "tag", &in.tag);
  e.Int("job_id", &in.job_id, true);
  ReadAddress(e, "source_address", &in.source_address);
  ReadU32(e, "index", &in.index);
  return in;
}

RouteIntent ReadRouteIntent(const Json& json, const std::string& path,
                            std::vector<Problem>* problems) {
  Reader e(json, path, problems);
  RouteIntent rt;
  ReadU32(e, "tag", &rt.tag);
  e.Int("job_id", &rt.job_id, true);
  ReadAddress(e, "source_address", &rt.source_address);
  ReadAddress(e, "destination_address", &rt.destination_address);
  ReadU32(e, "egress_port", &rt.egress_port);
  ReadU32(e, "multicast_group", &rt.multicast_group);
  std::string cls;
  if (e.String("class", &cls, false)) {
    if (auto parsed = ParseRouteClass(cls)) {
      rt.packet_class = *parsed;
    } else {
      e.Add(e.At("class"), absl::StrCat("must be raw, upstream or result, got \"", cls, "\""));
    }
  }
  return rt;
}

MulticastGroupIntent ReadMulticastGroup(const Json& json, const std::string& path,
                                        std::vector<Problem>* problems) {
  Reader e(json, path, problems);
  MulticastGroupIntent g;
  ReadU32(e, "group_id", &g.group_id);
  e.Int("job_id", &g.job_id, true);
  if (const Json* ports = e.Array("egress_ports", true)) {
    for (const Json& p : *ports) {
      if (p.is_number_unsigned())
        g.egress_ports.push_back(p.get<uint32_t>());
      else
        e.Add(e.At("egress_ports"), "expected non-negative integers");
    }
  }
  return g;
}

HostPortIntent ReadHostPort(const Json& json, const std::string& path,
                            std::vector<Problem>* problems) {
  Reader e(json, path, problems);
  HostPortIntent h;
  ReadU32(e, "port", &h.port);
  e.Uint("mac", &h.mac, true);
  ReadAddress(e, "address", &h.address);
  return h;
}

// Appends read(element, its path, problems) for each element of the array `field`, if present.
template <typename T, typename ReadFn>
void ReadEach(Reader& r, const char* field, std::vector<Problem>* problems, ReadFn read,
              std::vector<T>* out) {
  if (const Json* arr = r.Array(field, false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      out->push_back(read((*arr)[i], Indexed("", field, i), problems));
    }
  }
}

}  // namespace

absl::StatusOr<SwitchIntent> SwitchIntentFromJson(const Json& json) {
  std::vector<Problem> problems;
  SwitchIntent s;
  {
    Reader r(json, "", &problems);
    if (r.ok()) {
      r.String("switch_id", &s.switch_id, true);
      r.Int("version", &s.version, true);
      ReadEach(r, "jobs", &problems, ReadJobIntent, &s.jobs);
      ReadEach(r, "inputs", &problems, ReadInputIntent, &s.inputs);
      ReadEach(r, "routes", &problems, ReadRouteIntent, &s.routes);
      ReadEach(r, "multicast_groups", &problems, ReadMulticastGroup, &s.multicast_groups);
      ReadEach(r, "host_ports", &problems, ReadHostPort, &s.host_ports);
    }
  }
  if (!problems.empty()) return ProblemsToStatus("switch intent", problems);
  return s;
}

}  // namespace inac::core
