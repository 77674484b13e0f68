#include "northbound/rest_router.h"

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status.h"
#include "northbound/http_api.h"

namespace inac::northbound::rest {

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

std::string VersionEtag(int64_t version) { return absl::StrCat("\"", version, "\""); }

bool ParseIfMatch(const httplib::Request& req, httplib::Response& res,
                  std::optional<IfMatch>* out) {
  out->reset();
  if (!req.has_header("If-Match")) return true;
  IfMatch parsed;
  const std::string header = req.get_header_value("If-Match");
  for (absl::string_view item : absl::StrSplit(header, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item == "*") {
      parsed.any = true;
      continue;
    }
    const bool weak = absl::ConsumePrefix(&item, "W/");
    if (item.size() < 2 || item.front() != '"' || item.back() != '"') {
      BadRequest(res,
                 absl::StrCat("If-Match: not an entity tag: '", std::string(item),
                              "' (send the ETag GET returned, quotes included, or *)"),
                 "If-Match");
      return false;
    }
    if (weak) continue;  // a weak tag never matches in If-Match's strong comparison
    int64_t version = 0;
    if (!absl::SimpleAtoi(item.substr(1, item.size() - 2), &version) || version <= 0) {
      BadRequest(res,
                 absl::StrCat("If-Match: ", std::string(item),
                              " is not a version this server issues (\"1\", \"2\", ...)"),
                 "If-Match");
      return false;
    }
    parsed.versions.push_back(version);
  }
  *out = std::move(parsed);
  return true;
}

absl::StatusOr<int64_t> MatchVersion(const IfMatch& if_match, int64_t current) {
  if (current > 0 && (if_match.any || absl::c_linear_search(if_match.versions, current))) {
    return current;
  }
  if (current == 0) {
    return absl::AbortedError("If-Match: the resource does not exist yet");
  }
  return absl::AbortedError(absl::StrCat("If-Match: the current version is \"", current,
                                         "\"; GET it and apply the change again"));
}

void PreconditionFailed(httplib::Response& res, const absl::Status& status) {
  SendError(res, 412, "precondition_failed", std::string(status.message()), "If-Match");
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

}  // namespace inac::northbound::rest
