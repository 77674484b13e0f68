// Internal to http/ (not part of http/http_server.h's API): the bytes of the answers
// http/http_server.h's server writes. A handler's httplib::Response serialised whole (with
// Content-Length) or as the head of a chunked stream, the chunks of such a stream, the interim
// "100 Continue", and the answers the server gives itself (refusals, timeouts, connection caps)
// with INAC's JSON error body {"error": {"code", "message", "field"}}. Pure functions: no socket,
// no state. Used by http_connection.cc (refusals, 100 Continue), http_handler_pool.cc (handlers'
// answers and streams) and http_server.cc (the 503 over a connection cap).
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

namespace inac::http {

// The interim answer to "Expect: 100-continue".
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";
// The last chunk of a chunked body (no trailers).
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The reason phrase of `status` ("Not Found"); a generic one for codes without their own.
const char* ReasonPhrase(int status);

// A whole answer with INAC's error body (`field` empty) that closes the connection.
std::string ErrorResponse(int status, const std::string& code, const std::string& message);

// The error body's code for a refusal of the request reader (http/http1_reader.h): 413, 414,
// 431 and 501 have their own; anything else (400, 505) is "invalid_argument".
const char* ReaderErrorCode(int status);

// `res` whole, its body with a Content-Length. A status below 100 is sent as 500. The handler's
// Content-Length, Transfer-Encoding and Connection headers are replaced by the server's own
// (Connection: keep-alive or close, as `keep_alive` says).
std::string SerializeResponse(const httplib::Response& res, bool keep_alive);

// The head of `res` as a chunked stream (its content provider's output follows as chunks): the
// same headers as SerializeResponse, with "Transfer-Encoding: chunked" instead of a length.
std::string StreamHead(const httplib::Response& res, bool keep_alive);

// One chunk of a chunked body holding `data` (not empty: an empty chunk ends the body).
std::string Chunk(std::string_view data);

}  // namespace inac::http
