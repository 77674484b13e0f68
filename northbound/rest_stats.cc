// StatsResource: the controller's recent history (server/stats_history.h) for the dashboard.
#include "northbound/rest_resources.h"

namespace inac::northbound::rest {

namespace {

// The `since_ms` query parameter (default 0: the whole window); false after answering 400.
bool SinceMs(const httplib::Request& req, httplib::Response& res, int64_t* since) {
  *since = 0;
  if (!QueryInt(req, res, "since_ms", since)) return false;
  if (*since < 0) {
    BadRequest(res, "since_ms: must be a time in epoch milliseconds >= 0", "since_ms");
    return false;
  }
  return true;
}

}  // namespace

void StatsResource::Register(RouteTable& routes) {
  server::StatsHistory* s = stats_;
  routes.Add("GET", "/stats/switches", Access::kRead,
             [s](const httplib::Request& req, httplib::Response& res) {
               int64_t since = 0;
               if (!SinceMs(req, res, &since)) return;
               SendJson(res, 200, s->SwitchesJson(since));
             });
  routes.Add("GET", "/stats/jobs", Access::kRead,
             [s](const httplib::Request& req, httplib::Response& res) {
               int64_t since = 0, job = 0;
               if (!SinceMs(req, res, &since) || !QueryInt(req, res, "job", &job)) return;
               if (req.has_param("job") && job <= 0) {
                 return BadRequest(res, "job: must be a job id > 0", "job");
               }
               SendJson(res, 200,
                        s->JobsJson(since, req.has_param("job") ? std::optional<core::JobId>(job)
                                                                : std::nullopt));
             });
  routes.Add("GET", "/stats/controller", Access::kRead,
             [s](const httplib::Request& req, httplib::Response& res) {
               int64_t since = 0;
               if (!SinceMs(req, res, &since)) return;
               SendJson(res, 200, s->ControllerJson(since));
             });
}

}  // namespace inac::northbound::rest
