// JobsResource and PlanResource.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"
#include "northbound/rest_json.h"
#include "northbound/rest_resources.h"

namespace inac::northbound::rest {

namespace {

// The body of POST /jobs/{id}/data-path, decoded strictly: worker, path, allreduces and fallbacks
// required, reason optional (null: none). InvalidArgument naming the field at fault.
absl::StatusOr<server::DataPathReport> DataPathReportFromJson(const Json& body) {
  auto bad = [](const std::string& field, absl::string_view problem) {
    return core::WithField(absl::InvalidArgumentError(absl::StrCat(field, ": ", problem)), field);
  };
  server::DataPathReport report;
  bool worker = false, path = false, allreduces = false, fallbacks = false;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (key == "worker") {
      if (!it->is_string()) return bad(key, "must be a string (a worker of the job)");
      report.worker = it->get<std::string>();
      worker = true;
    } else if (key == "path") {
      std::optional<server::DataPathKind> kind;
      if (it->is_string()) kind = server::ParseDataPathKind(it->get<std::string>());
      if (!kind) return bad(key, "must be \"ina\", \"ps\" or \"fallback\"");
      report.path = *kind;
      path = true;
    } else if (key == "reason") {
      if (it->is_null()) continue;
      if (!it->is_string()) return bad(key, "must be a string");
      std::string reason = it->get<std::string>();
      // Characters are code points: every byte but UTF-8 continuation bytes starts one.
      const size_t chars =
          std::count_if(reason.begin(), reason.end(), [](char ch) { return (ch & 0xC0) != 0x80; });
      if (chars > server::kMaxDataPathReasonChars) {
        return bad(key, absl::StrCat("longer than ", server::kMaxDataPathReasonChars,
                                     " characters (got ", chars, ")"));
      }
      if (std::string problem = core::TextProblem(reason, reason.size()); !problem.empty()) {
        return bad(key, problem);
      }
      report.reason = std::move(reason);
    } else if (key == "allreduces" || key == "fallbacks") {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
          it->get<int64_t>() > server::kMaxDataPathCount) {
        return bad(key, "must be an integer between 0 and 2^53 - 1");
      }
      (key == "allreduces" ? report.allreduces : report.fallbacks) = it->get<int64_t>();
      (key == "allreduces" ? allreduces : fallbacks) = true;
    } else {
      return bad(key, "unknown field");
    }
  }
  if (!worker) return bad("worker", "required");
  if (!path) return bad("path", "required");
  if (!allreduces) return bad("allreduces", "required");
  if (!fallbacks) return bad("fallbacks", "required");
  return report;
}

// A job with its data path once its workers reported one (GET /jobs; GET /jobs/{id} adds its INA
// counters too).
Json ListedJobJson(server::JobService* jobs, const core::Job& job) {
  Json j = core::JobToJson(job);
  if (auto path = jobs->DataPath(job.id)) j["data_path"] = DataPathJson(*path);
  return j;
}

}  // namespace

void JobsResource::Register(RouteTable& routes) {
  server::JobService* c = jobs_;
  routes.AddBody("POST", "/jobs", Access::kOperate,
                 [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
                   auto body = ParseBody(text, res);
                   if (!body) return;
                   std::vector<core::Problem> problems;
                   core::JobSpec spec = core::JobSpecFromJson(*body, "", &problems);
                   if (!problems.empty()) return SendProblems(res, problems);
                   std::optional<core::IdempotencyKey> key;
                   if (req.has_header("Idempotency-Key")) {
                     std::string k = req.get_header_value("Idempotency-Key");
                     if (k.empty() || k.size() > 255) {
                       return BadRequest(res, "Idempotency-Key must be 1 to 255 characters",
                                         "Idempotency-Key");
                     }
                     key = core::IdempotencyKey{k, core::JobSpecToJson(spec).dump()};
                   }
                   auto result = c->SubmitJob(spec, key);
                   if (!result.ok()) return SendStatus(res, result.status());
                   res.set_header("Location", absl::StrCat("/api/v1/jobs/", result->job.id));
                   SendJson(res, result->created ? 201 : 200, core::JobToJson(result->job));
                 });
  routes.Add(
      "GET", "/jobs", Access::kRead, [c](const httplib::Request& req, httplib::Response& res) {
        core::JobFilter filter;
        if (req.has_param("state")) {
          std::vector<std::string> names = absl::StrSplit(req.get_param_value("state"), ',');
          for (const std::string& name : names) {
            auto st = core::ParseJobState(name);
            if (!st) {
              return BadRequest(res, absl::StrCat("state: unknown job state \"", name, "\""),
                                "state");
            }
            filter.states.push_back(*st);
          }
        }
        if (req.has_param("tenant")) {
          const std::string tenant = req.get_param_value("tenant");
          if (std::string problem = core::IdProblem(tenant, core::kMaxTenantBytes);
              !problem.empty()) {
            return BadRequest(res, absl::StrCat("tenant: ", problem), "tenant");
          }
          filter.tenant = tenant;
        }
        int64_t after = 0, limit = 100;
        if (!QueryInt(req, res, "after", &after) || !QueryInt(req, res, "limit", &limit)) {
          return;
        }
        if (limit < 1 || limit > 1000) {
          return BadRequest(res, "limit: must be between 1 and 1000", "limit");
        }
        if (after < 0) return BadRequest(res, "after: a cursor is a job id >= 0", "after");
        filter.after_id = after;
        filter.limit = limit;
        auto page = c->ListJobs(filter);
        if (!page.ok()) return SendStatus(res, page.status());
        // A page is also bounded in bytes: jobs are added while the answer stays within
        // kMaxJobPageBytes (always at least one), and next_after then resumes after the last one
        // sent. Each job is encoded once, into the answer's text.
        std::string text = "{\"jobs\":[";
        std::optional<core::JobId> next_after = page->next_after_id;
        for (size_t i = 0; i < page->jobs.size(); ++i) {
          std::string one =
              ListedJobJson(c, page->jobs[i]).dump(-1, ' ', false, Json::error_handler_t::replace);
          if (i > 0 && text.size() + one.size() + 32 > kMaxJobPageBytes) {
            next_after = page->jobs[i - 1].id;
            break;
          }
          if (i > 0) text += ',';
          text += one;
        }
        text += "],\"next_after\":";
        text += next_after ? std::to_string(*next_after) : "null";
        text += '}';
        res.status = 200;
        res.set_content(std::move(text), "application/json");
      });
  routes.Add(
      "GET", "/jobs/{id}", Access::kRead,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto job = c->GetJob(std::stoll(req.matches[1]));
        if (!job.ok()) return SendStatus(res, job.status());
        Json body = ListedJobJson(c, *job);
        body["ina_counters"] = InaCountersJson(c->JobCounters(job->id));
        SendJson(res, 200, body);
      },
      /*tenant_workers=*/true);
  routes.Add("DELETE", "/jobs/{id}", Access::kOperate,
             [c](const httplib::Request& req, httplib::Response& res) {
               auto job = c->CancelJob(std::stoll(req.matches[1]));
               if (!job.ok()) return SendStatus(res, job.status());
               SendJson(res, 200, core::JobToJson(*job));
             });
  routes.Add(
      "GET", "/jobs/{id}/config", Access::kRead,
      [c](const httplib::Request& req, httplib::Response& res) {
        auto config = c->GetJobConfig(std::stoll(req.matches[1]));
        if (!config.ok()) return SendStatus(res, config.status());
        SendJson(res, 200, ConfigJson(*config));
      },
      /*tenant_workers=*/true);
  routes.AddBody(
      "POST", "/jobs/{id}/progress", Access::kOperate,
      [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
        auto body = ParseBody(text, res);
        if (!body) return;
        int64_t iterations = -1;
        std::optional<double> loss;
        std::optional<double> grad_local, grad_global;  // InGo's refit (docs/batch-size.md)
        for (auto it = body->begin(); it != body->end(); ++it) {
          if (it.key() == "iterations_done") {
            if (!it->is_number_integer() || it->get<int64_t>() < 0) {
              return BadRequest(res, "iterations_done: must be a non-negative integer",
                                "iterations_done");
            }
            iterations = it->get<int64_t>();
          } else if (it.key() == "loss") {
            if (!it->is_number() || !std::isfinite(it->get<double>())) {
              return BadRequest(res, "loss: must be a finite number", "loss");
            }
            loss = it->get<double>();
          } else if (it.key() == "grad_sqr_local" || it.key() == "grad_sqr_global") {
            if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
              return BadRequest(res, absl::StrCat(it.key(), ": must be a finite number >= 0"),
                                it.key());
            }
            (it.key() == "grad_sqr_local" ? grad_local : grad_global) = it->get<double>();
          } else {
            return BadRequest(res, absl::StrCat(it.key(), ": unknown field"), it.key());
          }
        }
        if (iterations < 0) return BadRequest(res, "iterations_done: required", "iterations_done");
        if (grad_local.has_value() != grad_global.has_value()) {
          const char* missing = grad_local ? "grad_sqr_global" : "grad_sqr_local";
          return BadRequest(res,
                            absl::StrCat(missing, ": required with ",
                                         grad_local ? "grad_sqr_local" : "grad_sqr_global"),
                            missing);
        }
        const core::JobId id = std::stoll(req.matches[1]);
        if (grad_local) {
          // The refit's precondition is checked before anything is recorded, so a 409 leaves
          // the job's progress untouched.
          auto before = c->GetJob(id);
          if (!before.ok()) return SendStatus(res, before.status());
          if (before->spec.workers.size() < 2) {
            return SendStatus(res, absl::FailedPreconditionError(absl::StrCat(
                                       "job ", id,
                                       ": grad_sqr_local/grad_sqr_global need at least two "
                                       "workers (local vs aggregated gradient)")));
          }
        }
        auto job = c->ReportProgress(id, iterations, loss);
        if (!job.ok()) return SendStatus(res, job.status());
        if (grad_local) {
          absl::Status s = c->ReportGradientStats(job->id, *grad_local, *grad_global);
          if (!s.ok()) return SendStatus(res, s);
        }
        SendJson(res, 200, core::JobToJson(*job));
      },
      /*tenant_workers=*/true);
  // How a worker's all-reduces are carried (server/data_path.h): held in memory, answered as the
  // job's `data_path`.
  routes.AddBody(
      "POST", "/jobs/{id}/data-path", Access::kOperate,
      [c](const httplib::Request& req, const std::string& text, httplib::Response& res) {
        auto body = ParseBody(text, res);
        if (!body) return;
        auto report = DataPathReportFromJson(*body);
        if (!report.ok()) return SendStatus(res, report.status());
        auto path = c->ReportDataPath(std::stoll(req.matches[1]), *report);
        if (!path.ok()) return SendStatus(res, path.status());
        SendJson(res, 200, DataPathJson(*path));
      },
      /*tenant_workers=*/true);
}

void PlanResource::Register(RouteTable& routes) {
  server::PlanService* p = plans_;
  routes.Add("GET", "/plan", Access::kRead, [p](const httplib::Request&, httplib::Response& res) {
    auto plan = p->CurrentPlan();
    if (!plan.ok()) return SendStatus(res, plan.status());
    if (!plan->has_value()) {
      return SendStatus(res, absl::NotFoundError("no plan has been computed yet"));
    }
    Json body = core::PlanToJson((*plan)->plan);
    body["created_ms"] = (*plan)->created_ms;
    SendJson(res, 200, body);
  });
  routes.AddBody("POST", "/plan/preview", Access::kOperate,
                 [p](const httplib::Request&, const std::string& text, httplib::Response& res) {
                   auto body = ParseBody(text, res);
                   if (!body) return;
                   std::vector<core::Problem> problems;
                   core::JobSpec spec = core::JobSpecFromJson(*body, "", &problems);
                   if (!problems.empty()) return SendProblems(res, problems);
                   auto plan = p->PreviewPlan(spec);
                   if (!plan.ok()) return SendStatus(res, plan.status());
                   SendJson(res, 200, core::PlanToJson(*plan));
                 });
}

}  // namespace inac::northbound::rest
