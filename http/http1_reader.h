// The HTTP/1.1 request reader: the framing of http/http_server.h's requests, without a socket.
// It is handed the bytes a connection has received and not yet consumed, and says what they make:
// more bytes are needed, a request head was read, a whole request was read, or the bytes are
// refused with the status to answer (the server then closes the connection). It knows nothing of
// INAC: no JSON, no routing, no timeouts, no sockets.
//
// Contract (RFC 9112, with the request-smuggling defences). "Refused" means Read returns kError
// with the status to answer; the reader then reads nothing more.
//   - Empty lines (CRLF) before a request line are skipped (RFC 9112 section 2.2).
//   - The head ends at the first CRLF CRLF and its lines are separated by CRLF. The request line
//     is at most `max_request_line_bytes` (414), judged first however the bytes arrive (also when
//     the whole head is over its limit; of a line whose end has not arrived, a last CR does not
//     count); the head, its final CRLF CRLF included, is at most `max_header_bytes` (431). Both
//     are checked while the head is still incomplete too, so an endless head is cut at the limit.
//   - The request line is exactly METHOD SP TARGET SP VERSION (single spaces), the method a
//     token, else 400; the version HTTP/1.1 or HTTP/1.0, another "HTTP/..." is 505, any other
//     word 400; the target starts with "/" (origin form) and holds no control character or
//     whitespace (RFC 9112 section 3.2), else 400.
//   - At most `max_headers` header lines (431). Each is NAME ":" VALUE with NAME a token (no
//     whitespace before the colon), else 400; a line that starts with a space or a tab (obs-fold)
//     is 400; a value holding CR, LF or NUL is 400 (RFC 9110 section 5.5; NUL is no token
//     character either). Values are trimmed of ASCII whitespace; names keep their case; repeats
//     are kept.
//   - The body's framing, checked in this order before kHead: Transfer-Encoding together with
//     Content-Length is 400; a Transfer-Encoding other than "chunked" (case-insensitive) is 501;
//     repeated Content-Length headers that differ are 400; a Content-Length that is not all
//     digits or overflows 64 bits is 400, over `max_body_bytes` 413 (before any body byte is
//     read). Neither header: no body.
//   - Chunked bodies: a chunk size is 1 to 15 hex digits (whitespace around it and extensions
//     after ";" ignored), else 400; chunk data must be followed by CRLF, else 400; the body's
//     total over `max_body_bytes` is 413 (checked at each chunk size, before its data); a
//     chunk-size or trailer line of which more than `max_chunk_line_bytes` bytes are buffered
//     without its CRLF is 400; trailer fields are read and dropped, at most `max_header_bytes`
//     of them (431).
//   - keep_alive: for HTTP/1.1 unless the Connection value contains "close", for HTTP/1.0 only
//     when it contains "keep-alive" (case-insensitive).
//   - Pipelining: the bytes after a request belong to the next one: call Read again with them.
// Kept as the server had them (each a candidate for tightening; RFC 9110/9112 would refuse):
//   - the framing lookups (Transfer-Encoding, Content-Length, Connection, Expect) take the first
//     header of that name only (for Content-Length every repeat must match it), and a value up
//     to its first NUL (none is left: values with NUL are refused), as cpp-httplib's
//     get_header_value does; Transfer-Encoding is honoured in HTTP/1.0 requests too;
//   - a chunk-size or trailer line is refused only if more than `max_chunk_line_bytes` of it (its
//     CR included) were ever buffered without its LF, whatever its length, so that refusal
//     depends on how the bytes were split.
//
// Thread safety: one reader per connection, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inac::http {

// The server's limits (http/http_server.h HttpServerOptions; the defaults are its defaults).
struct Http1Limits {
  size_t max_request_line_bytes = 8192;
  size_t max_header_bytes = 16384;  // request line and headers, the final CRLF CRLF included
  size_t max_headers = 100;         // header lines
  size_t max_body_bytes = 1 << 20;  // Content-Length, or the sum of the chunks
  size_t max_chunk_line_bytes = 1024;
};

struct Http1Request {
  std::string method;
  std::string target;   // as sent (starts with "/"; not decoded)
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  // In arrival order, names as sent, values trimmed; repeated names are kept.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // complete once the request is (Http1Event::kRequest)
  bool keep_alive = true;
  bool chunked = false;          // Transfer-Encoding: chunked
  uint64_t content_length = 0;   // Content-Length (0 when chunked or absent)
  bool expect_continue = false;  // "Expect: 100-continue" and a body follows

  // True when a body follows the head (chunked, or a Content-Length above 0).
  bool has_body() const { return chunked || content_length > 0; }
};

// A refusal: the status to answer and why (the error body's message).
struct Http1Error {
  int status = 0;  // 400, 413, 414, 431, 501 or 505
  std::string message;
};

enum class Http1Event {
  kNeedMore,  // the bytes end inside a request (or hold none): call again once more arrived
  kHead,      // a request head was read: request() has everything but the body
  kRequest,   // a whole request was read: TakeRequest()
  kError,     // refused: error(); the connection is answered and closed
};

// The incremental reader a connection keeps: body bytes are taken as they arrive and looked at
// once; only an incomplete head or chunk line is searched again for its end when more bytes come
// (bounded by `max_header_bytes` and `max_chunk_line_bytes`).
class Http1Reader {
 public:
  explicit Http1Reader(Http1Limits limits = {});

  // Reads from `in`, the bytes received and not consumed yet, until a head is read, a request is
  // complete, the bytes are refused or they run out. Sets *consumed to how many bytes of `in` it
  // took (skipped CRLFs, a head, body bytes: the caller drops them before the next call; bytes
  // of an incomplete head or chunk line are left in `in`). Every request gives kHead, then
  // (possibly after kNeedMore) kRequest. After kError, Read returns kError again and consumes
  // nothing.
  Http1Event Read(std::string_view in, size_t* consumed);

  // True while a request head is awaited or arriving (no head read yet): the connection's
  // header timeout applies; false while a body is being read.
  bool reading_head() const { return phase_ == Phase::kHead; }
  // The request being read: its head once kHead was returned; its body grows until kRequest.
  const Http1Request& request() const { return request_; }
  // The complete request (after kRequest); the reader then awaits the next request (a Read
  // without TakeRequest drops it).
  Http1Request TakeRequest();
  const Http1Error& error() const { return error_; }
  // Drops the request in progress and awaits a head again (a refused head, a connection cut). A
  // refusal is final: Reset does not undo it.
  void Reset();

 private:
  enum class Phase {
    kHead,
    kHeadRead,  // kHead was returned for a request without a body
    kBody,
    kChunkSize,
    kChunkData,
    kChunkEnd,
    kTrailer,
    kDone,  // kRequest was returned; TakeRequest() starts the next request
    kFailed,
  };
  Http1Event Fail(int status, std::string message);
  Http1Event ReadHead(std::string_view head);

  Http1Limits limits_;
  Phase phase_ = Phase::kHead;
  Http1Request request_;
  Http1Error error_;
  uint64_t remaining_ = 0;  // body or chunk bytes still to read
  size_t trailer_bytes_ = 0;
};

// The first request in `bytes` (all a connection received so far), read in one go.
struct Http1Result {
  Http1Event event = Http1Event::kNeedMore;  // kNeedMore, kRequest or kError (never kHead)
  Http1Request request;                      // kRequest
  Http1Error error;                          // kError
  size_t consumed = 0;  // kRequest: the bytes it took; the next request starts there
};
Http1Result ReadHttp1Request(std::string_view bytes, const Http1Limits& limits = {});

}  // namespace inac::http
