// AuditResource: GET /audit?after=&limit=&actor=, the audit log of API writes.
#include "absl/strings/str_cat.h"
#include "northbound/rest_resources.h"

namespace inac::northbound::rest {

namespace {

constexpr size_t kMaxActorBytes = 256;

Json AuditEntryJson(const core::AuditEntry& e) {
  Json j = Json::object();
  j["seq"] = e.seq;
  j["time_ms"] = e.time_ms;
  j["actor"] = e.actor;
  j["role"] = e.role;
  j["remote_addr"] = e.remote_addr;
  j["method"] = e.method;
  j["path"] = e.path;
  j["status"] = e.status;
  j["job_id"] = e.job_id ? Json(*e.job_id) : Json(nullptr);
  return j;
}

}  // namespace

void AuditResource::Register(RouteTable& routes) {
  server::AuditService* a = audit_;
  routes.Add(
      "GET", "/audit", Access::kAdmin, [a](const httplib::Request& req, httplib::Response& res) {
        core::AuditFilter filter;
        int64_t after = 0, limit = 100;
        if (!QueryInt(req, res, "after", &after) || !QueryInt(req, res, "limit", &limit)) {
          return;
        }
        if (limit < 1 || limit > 1000) {
          return BadRequest(res, "limit: must be between 1 and 1000", "limit");
        }
        if (after < 0) {
          return BadRequest(res, "after: a cursor is a sequence number >= 0", "after");
        }
        if (req.has_param("actor")) {
          const std::string actor = req.get_param_value("actor");
          if (actor.empty() || actor.size() > kMaxActorBytes) {
            return BadRequest(res, absl::StrCat("actor: must be 1 to ", kMaxActorBytes, " bytes"),
                              "actor");
          }
          filter.actor = actor;
        }
        filter.after_seq = after;
        filter.limit = limit;
        auto page = a->ListAudit(filter);
        if (!page.ok()) return SendStatus(res, page.status());
        Json entries = Json::array();
        for (const core::AuditEntry& e : page->entries) entries.push_back(AuditEntryJson(e));
        Json body = Json::object();
        body["entries"] = entries;
        body["next_after"] = page->next_after_seq ? Json(*page->next_after_seq) : Json(nullptr);
        SendJson(res, 200, body);
      });
}

}  // namespace inac::northbound::rest
