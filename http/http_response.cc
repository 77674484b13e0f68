#include "http/http_response.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace inac::http {
namespace {

// The status line, the handler's headers but the framing ones, and the Connection header: what a
// whole answer and a stream's head share.
std::string HeadLines(const httplib::Response& res, bool keep_alive) {
  const int status = res.status < 100 ? 500 : res.status;
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\n");
  for (const auto& [k, v] : res.headers) {
    if (absl::EqualsIgnoreCase(k, "Content-Length") ||
        absl::EqualsIgnoreCase(k, "Transfer-Encoding") || absl::EqualsIgnoreCase(k, "Connection")) {
      continue;
    }
    absl::StrAppend(&out, k, ": ", v, "\r\n");
  }
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n");
  return out;
}

}  // namespace

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";  // the dashboard's files (northbound/web_assets.h)
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 421:
      return "Misdirected Request";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}
std::string ErrorResponse(int status, const std::string& code, const std::string& message) {
  nlohmann::ordered_json err = nlohmann::ordered_json::object();
  err["code"] = code;
  err["message"] = message;
  err["field"] = "";
  const std::string body = nlohmann::ordered_json{{"error", err}}.dump();
  return absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

const char* ReaderErrorCode(int status) {
  switch (status) {
    case 413:
      return "payload_too_large";
    case 414:
      return "uri_too_long";
    case 431:
      return "request_header_fields_too_large";
    case 501:
      return "unimplemented";
    default:
      return "invalid_argument";  // 400, 505
  }
}

std::string SerializeResponse(const httplib::Response& res, bool keep_alive) {
  std::string out = HeadLines(res, keep_alive);
  absl::StrAppend(&out, "Content-Length: ", res.body.size(), "\r\n\r\n", res.body);
  return out;
}

std::string StreamHead(const httplib::Response& res, bool keep_alive) {
  std::string out = HeadLines(res, keep_alive);
  // A streamed body, sent chunked whatever the provider kind.
  absl::StrAppend(&out, "Transfer-Encoding: chunked\r\n\r\n");
  return out;
}

std::string Chunk(std::string_view data) {
  return absl::StrCat(absl::Hex(data.size()), "\r\n", absl::string_view(data.data(), data.size()),
                      "\r\n");
}

}  // namespace inac::http
