// HealthResource and the fabric's resources (topology, links, switches).
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "northbound/rest_json.h"
#include "northbound/rest_resources.h"

namespace inac::northbound::rest {

void HealthResource::Register(RouteTable& routes) {
  server::HealthService* h = health_;
  routes.Add("GET", "/healthz", Access::kPublic,
             [h](const httplib::Request&, httplib::Response& res) {
               if (h->LoopAlive()) return SendJson(res, 200, {{"status", "ok"}});
               // Like every error: the Error body (api/openapi.yaml).
               SendError(res, 503, "unavailable", "the control loop is not running");
             });
  routes.Add("GET", "/readyz", Access::kPublic,
             [h](const httplib::Request&, httplib::Response& res) {
               absl::Status ready = h->Ready();
               if (ready.ok()) return SendJson(res, 200, {{"status", "ready"}});
               SendError(res, 503, "unavailable", std::string(ready.message()));
             });
  routes.Add("GET", "/metrics", Access::kRead,
             [h](const httplib::Request&, httplib::Response& res) {
               res.set_content(h->MetricsText(), "text/plain; version=0.0.4");
             });
}

namespace {

// The topology version a conditional write must find: nullopt without If-Match; else the current
// version when the header matches it, or Aborted (412) when it does not.
absl::StatusOr<std::optional<int64_t>> ExpectedVersion(server::TopologyService* t,
                                                       const std::optional<IfMatch>& if_match) {
  if (!if_match) return std::optional<int64_t>();
  auto record = t->GetTopology();
  if (!record.ok()) return record.status();
  auto version = MatchVersion(*if_match, record->has_value() ? (*record)->version : 0);
  if (!version.ok()) return version.status();
  return std::optional<int64_t>(*version);
}

// A write's error: Aborted is an If-Match that no longer holds (412), the rest as usual.
void Conditional(httplib::Response& res, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kAborted) return PreconditionFailed(res, status);
  SendStatus(res, status);
}

}  // namespace

void TopologyResource::Register(RouteTable& routes) {
  server::TopologyService* t = topology_;
  routes.Add("GET", "/topology", Access::kRead,
             [t](const httplib::Request&, httplib::Response& res) {
               auto record = t->GetTopology();
               if (!record.ok()) return SendStatus(res, record.status());
               if (!record->has_value()) {
                 return SendStatus(res, absl::NotFoundError("no topology has been loaded"));
               }
               res.set_header("X-Topology-Version", std::to_string((*record)->version));
               res.set_header("ETag", VersionEtag((*record)->version));
               SendJson(res, 200, core::TopologyToJson((*record)->topology));
             });
  routes.AddBody("PUT", "/topology", Access::kAdmin,
                 [t](const httplib::Request& req, const std::string& text, httplib::Response& res) {
                   std::optional<IfMatch> if_match;
                   if (!ParseIfMatch(req, res, &if_match)) return;
                   auto body = ParseBody(text, res);
                   if (!body) return;
                   std::vector<core::Problem> problems;
                   core::Topology topology = core::TopologyFromJson(*body, &problems);
                   if (!problems.empty()) return SendProblems(res, problems);
                   auto expected = ExpectedVersion(t, if_match);
                   if (!expected.ok()) return Conditional(res, expected.status());
                   auto version = t->PutTopology(topology, *expected);  // validates
                   if (!version.ok()) return Conditional(res, version.status());
                   res.set_header("ETag", VersionEtag(*version));
                   SendJson(res, 200, {{"version", *version}});
                 });
  routes.Add("GET", "/links", Access::kRead, [t](const httplib::Request&, httplib::Response& res) {
    auto record = t->GetTopology();
    if (!record.ok()) return SendStatus(res, record.status());
    Json links = Json::array();
    if (record->has_value()) links = core::TopologyToJson((*record)->topology)["links"];
    SendJson(res, 200, {{"links", links}});
  });
  routes.AddBody("PATCH", "/links/{id}", Access::kAdmin,
                 [t](const httplib::Request& req, const std::string& text, httplib::Response& res) {
                   std::optional<IfMatch> if_match;
                   if (!ParseIfMatch(req, res, &if_match)) return;
                   auto body = ParseBody(text, res);
                   if (!body) return;
                   for (auto it = body->begin(); it != body->end(); ++it) {
                     if (it.key() != "status") {
                       return BadRequest(res, absl::StrCat(it.key(), ": unknown field"), it.key());
                     }
                   }
                   if (!body->contains("status") || !(*body)["status"].is_string()) {
                     return BadRequest(res, "status: required, \"up\" or \"down\"", "status");
                   }
                   auto status = core::ParseLinkStatus((*body)["status"].get<std::string>());
                   if (!status)
                     return BadRequest(res, "status: must be \"up\" or \"down\"", "status");
                   auto expected = ExpectedVersion(t, if_match);
                   if (!expected.ok()) return Conditional(res, expected.status());
                   auto change = t->SetLinkStatus(req.matches[1], *status, *expected);
                   if (!change.ok()) return Conditional(res, change.status());
                   res.set_header("ETag", VersionEtag(change->topology_version));
                   core::Topology one;
                   one.links.push_back(change->link);
                   SendJson(res, 200, core::TopologyToJson(one)["links"][0]);
                 });
}

void SwitchesResource::Register(RouteTable& routes) {
  server::TopologyService* t = topology_;
  routes.Add("GET", "/switches", Access::kRead,
             [t](const httplib::Request&, httplib::Response& res) {
               Json arr = Json::array();
               for (const auto& sw : t->Switches()) arr.push_back(SwitchJson(sw));
               SendJson(res, 200, {{"switches", arr}});
             });
  routes.Add("GET", "/switches/{id}", Access::kRead,
             [t](const httplib::Request& req, httplib::Response& res) {
               auto sw = t->GetSwitch(req.matches[1]);
               if (!sw.ok()) return SendStatus(res, sw.status());
               SendJson(res, 200, SwitchJson(*sw));
             });
}

}  // namespace inac::northbound::rest
