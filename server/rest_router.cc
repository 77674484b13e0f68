#include "server/rest_router.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "server/http_api.h"

namespace inac::server::rest {

void RouteTable::Add(const std::string& method, const std::string& path, Access access,
                     httplib::Server::Handler handler, bool tenant_workers) {
  entries_.push_back(
      RouteEntry{method, path, access, tenant_workers,
                 [handler = std::move(handler)](const httplib::Request& req, const std::string&,
                                                httplib::Response& res) { handler(req, res); }});
}

void RouteTable::AddBody(const std::string& method, const std::string& path, Access access,
                         BodyHandler handler, bool tenant_workers) {
  entries_.push_back(RouteEntry{method, path, access, tenant_workers, std::move(handler)});
}

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  // Invalid UTF-8 (from a path or query parameter echoed in a message) is replaced, not thrown.
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, int http, const std::string& code, std::string message,
               std::string field) {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  Json err = Json::object();
  err["code"] = code;
  err["message"] = message;
  err["field"] = field;
  Json body = Json::object();
  body["error"] = err;
  SendJson(res, http, body);
}

void SendStatus(httplib::Response& res, const absl::Status& status) {
  SendError(res, StatusToHttp(status.code()), ErrorCodeName(status.code()),
            std::string(status.message()), core::FieldOf(status));
}

void BadRequest(httplib::Response& res, const std::string& message, const std::string& field) {
  SendStatus(res, core::WithField(absl::InvalidArgumentError(message), field));
}

void SendProblems(httplib::Response& res, const std::vector<core::Problem>& problems) {
  SendStatus(res, core::ProblemsError(problems));
}

std::optional<Json> ParseBody(const std::string& text, httplib::Response& res) {
  if (text.empty()) {
    BadRequest(res, "request body is empty; a JSON object is required");
    return std::nullopt;
  }
  std::vector<core::Problem> problems;
  auto json = core::ParseJsonText(text, &problems);
  if (!json) {
    SendProblems(res, problems);  // the path of a duplicate key or of the nesting limit
    return std::nullopt;
  }
  if (!json->is_object()) {
    BadRequest(res, "request body must be a JSON object");
    return std::nullopt;
  }
  return json;
}

bool QueryInt(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out) {
  if (!req.has_param(name)) return true;
  std::string v = req.get_param_value(name);
  if (!absl::SimpleAtoi(v, out)) {
    BadRequest(res, absl::StrCat("query parameter ", name, ": not an integer: \"", v, "\""), name);
    return false;
  }
  return true;
}

}  // namespace inac::server::rest
