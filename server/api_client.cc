#include "server/api_client.h"

#include <httplib.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace inac::server {

namespace {

using Json = nlohmann::json;

// The API's error codes (snake_case canonical names, server/http_api.cc) back to absl codes.
absl::StatusCode CodeFromName(const std::string& name, int http_status) {
  static const std::map<std::string, absl::StatusCode> kCodes = {
      {"invalid_argument", absl::StatusCode::kInvalidArgument},
      {"unauthenticated", absl::StatusCode::kUnauthenticated},
      {"permission_denied", absl::StatusCode::kPermissionDenied},
      {"not_found", absl::StatusCode::kNotFound},
      {"already_exists", absl::StatusCode::kAlreadyExists},
      {"failed_precondition", absl::StatusCode::kFailedPrecondition},
      {"out_of_range", absl::StatusCode::kOutOfRange},
      {"resource_exhausted", absl::StatusCode::kResourceExhausted},
      {"unavailable", absl::StatusCode::kUnavailable},
      {"internal", absl::StatusCode::kInternal},
  };
  if (auto it = kCodes.find(name); it != kCodes.end()) return it->second;
  switch (http_status) {
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kFailedPrecondition;
    case 413:
      return absl::StatusCode::kOutOfRange;
    default:
      return http_status < 500 ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kInternal;
  }
}

}  // namespace

struct ApiClient::Impl {
  explicit Impl(const std::string& base) : client(base) {}
  httplib::Client client;
  std::string server;
};

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(const ApiClientOptions& options) {
  const std::string& s = options.server;
  if (!absl::StartsWith(s, "http://") || s.size() <= 7 || s[7] == '/' || s[7] == ':') {
    return absl::InvalidArgumentError(
        absl::StrCat("--server: \"", s, "\" is not an http:// URL (e.g. http://127.0.0.1:8080)"));
  }
  std::string base = s;
  while (base.size() > 7 && base.back() == '/') base.pop_back();
  if (base.find('/', 7) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server: \"", s, "\" must be scheme://host[:port] without a path"));
  }
  auto impl = std::make_unique<Impl>(base);
  if (!impl->client.is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("--server: cannot use \"", s, "\""));
  }
  impl->server = base;
  const time_t seconds = options.timeout_ms / 1000;
  const time_t micros = (options.timeout_ms % 1000) * 1000;
  impl->client.set_connection_timeout(seconds, micros);
  impl->client.set_read_timeout(seconds, micros);
  impl->client.set_write_timeout(seconds, micros);
  if (!options.token.empty()) impl->client.set_bearer_token_auth(options.token);
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

absl::StatusOr<ApiReply> ApiClient::Call(
    const std::string& method, const std::string& path, const Json& body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  const std::string url = "/api/v1" + path;
  const std::string payload = body.is_null() ? std::string() : body.dump();
  const char* type = "application/json";
  if (method != "GET" && method != "DELETE" && method != "POST" && method != "PUT" &&
      method != "PATCH") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported method ", method));
  }
  httplib::Client& c = impl_->client;
  httplib::Result r = method == "GET"      ? c.Get(url, h)
                      : method == "DELETE" ? c.Delete(url, h, payload, type)
                      : method == "POST"   ? c.Post(url, h, payload, type)
                      : method == "PUT"    ? c.Put(url, h, payload, type)
                                           : c.Patch(url, h, payload, type);
  if (!r) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", impl_->server, ": ", httplib::to_string(r.error())));
  }
  ApiReply reply;
  reply.http_status = r->status;
  if (!r->body.empty()) {
    reply.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) {
      return absl::InternalError(absl::StrCat("HTTP ", r->status, " from ", impl_->server, " ",
                                              method, " ", url, ": the body is not JSON"));
    }
  }
  if (r->status >= 200 && r->status < 300) return reply;

  std::string code, message, field;
  if (reply.body.is_object() && reply.body.contains("error") && reply.body["error"].is_object()) {
    const Json& e = reply.body["error"];
    if (e.contains("code") && e["code"].is_string()) code = e["code"].get<std::string>();
    if (e.contains("message") && e["message"].is_string())
      message = e["message"].get<std::string>();
    if (e.contains("field") && e["field"].is_string()) field = e["field"].get<std::string>();
  }
  std::string text = absl::StrCat("HTTP ", r->status, code.empty() ? "" : " ", code,
                                  message.empty() ? "" : ": ", message);
  if (!field.empty()) absl::StrAppend(&text, " [field ", field, "]");
  if (r->status >= 500) return absl::InternalError(text);
  return absl::Status(CodeFromName(code, r->status), text);
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return 1;
    default:
      return 2;
  }
}

}  // namespace inac::server
