// Fuzzes the HTTP/1.1 request reader (http/http1_reader.h). The first byte picks the limits (the
// server's, or small ones so that every limit is reached) and how the rest arrives in the second
// reading; the rest is a connection's bytes. Besides the sanitizers, it checks:
//   - the reader's contract on every event: consumed within the bytes given, kHead then kRequest
//     for each request, heads that satisfy the grammar and limits, bodies within the limit and
//     as long as their Content-Length, refusals with one of the contract's statuses, nothing read
//     after a refusal;
//   - the same requests and the same end whether the bytes arrive at once or a few at a time,
//     but for the arrival-dependent refusals the header names (a 414, or a "malformed chunk",
//     met only when the bytes arrive split may end the stream earlier; 414 and 431 may swap);
//   - ReadHttp1Request (one go) reads the first request the incremental reader reads.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "http/http1_reader.h"

namespace {

using inac::http::Http1Error;
using inac::http::Http1Event;
using inac::http::Http1Limits;
using inac::http::Http1Reader;
using inac::http::Http1Request;
using inac::http::Http1Result;
using inac::http::ReadHttp1Request;

bool Same(const Http1Request& a, const Http1Request& b) {
  return a.method == b.method && a.target == b.target && a.version == b.version &&
         a.headers == b.headers && a.body == b.body && a.keep_alive == b.keep_alive &&
         a.chunked == b.chunked && a.content_length == b.content_length &&
         a.expect_continue == b.expect_continue;
}

bool IsTokenChar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos || c == '\0';
}

void CheckHead(const Http1Request& r, const Http1Limits& limits) {
  FUZZ_CHECK(!r.method.empty());
  for (char c : r.method) FUZZ_CHECK(IsTokenChar(c));
  FUZZ_CHECK(r.version == "HTTP/1.1" || r.version == "HTTP/1.0");
  FUZZ_CHECK(!r.target.empty() && r.target[0] == '/');
  FUZZ_CHECK(r.target.find(' ') == std::string::npos);
  FUZZ_CHECK(r.method.size() + r.target.size() + r.version.size() + 2 <=
             limits.max_request_line_bytes);
  FUZZ_CHECK(r.headers.size() <= limits.max_headers);
  for (const auto& [name, value] : r.headers) {
    FUZZ_CHECK(!name.empty());
    for (char c : name) FUZZ_CHECK(IsTokenChar(c));
    FUZZ_CHECK(value.find("\r\n") == std::string::npos);
  }
  FUZZ_CHECK(!(r.chunked && r.content_length > 0));
  FUZZ_CHECK(r.content_length <= limits.max_body_bytes);
  FUZZ_CHECK(!r.expect_continue || r.has_body());
}

struct Outcome {
  std::vector<Http1Request> requests;
  Http1Event end = Http1Event::kNeedMore;  // kNeedMore or kError
  Http1Error error;
};

// Reads `bytes` as the server does, `step` bytes arriving at a time (0: all at once).
Outcome Run(std::string_view bytes, size_t step, const Http1Limits& limits) {
  Http1Reader reader(limits);
  Outcome out;
  std::string in;
  size_t fed = 0;
  bool in_request = false;  // kHead returned, kRequest not yet
  while (true) {
    size_t consumed = 0;
    const Http1Event event = reader.Read(in, &consumed);
    FUZZ_CHECK(consumed <= in.size());
    in.erase(0, consumed);
    switch (event) {
      case Http1Event::kHead:
        FUZZ_CHECK(!in_request);
        in_request = true;
        CheckHead(reader.request(), limits);
        FUZZ_CHECK(reader.request().body.empty());
        FUZZ_CHECK(!reader.reading_head());
        continue;
      case Http1Event::kRequest: {
        FUZZ_CHECK(in_request);
        in_request = false;
        Http1Request r = reader.TakeRequest();
        FUZZ_CHECK(reader.reading_head());
        CheckHead(r, limits);
        FUZZ_CHECK(r.body.size() <= limits.max_body_bytes);
        if (!r.chunked) FUZZ_CHECK(r.body.size() == r.content_length);
        out.requests.push_back(std::move(r));
        continue;
      }
      case Http1Event::kError: {
        const int s = reader.error().status;
        FUZZ_CHECK(s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505);
        FUZZ_CHECK(!reader.error().message.empty());
        size_t again = 1;
        FUZZ_CHECK(reader.Read("GET / HTTP/1.1\r\n\r\n", &again) == Http1Event::kError);
        FUZZ_CHECK(again == 0);
        out.end = Http1Event::kError;
        out.error = reader.error();
        return out;
      }
      case Http1Event::kNeedMore:
        break;
    }
    if (fed == bytes.size()) return out;
    const size_t n = step == 0 ? bytes.size() - fed : std::min(step, bytes.size() - fed);
    in.append(bytes.substr(fed, n));
    fed += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  Http1Limits limits;  // the server's defaults
  if (control & 1) {
    limits.max_request_line_bytes = 40;
    limits.max_header_bytes = 120;
    limits.max_headers = 4;
    limits.max_body_bytes = 48;
    limits.max_chunk_line_bytes = 16;
  }
  const size_t step = 1 + (control >> 1);  // 1 to 128 bytes at a time
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  const Outcome whole = Run(bytes, 0, limits);
  const Outcome split = Run(bytes, step, limits);

  // The one-go reading finds the first request, or the same end.
  const Http1Result first = ReadHttp1Request(bytes, limits);
  if (!whole.requests.empty()) {
    FUZZ_CHECK(first.event == Http1Event::kRequest);
    FUZZ_CHECK(Same(first.request, whole.requests[0]));
    FUZZ_CHECK(first.consumed > 0 && first.consumed <= bytes.size());
    // The rest, read in one go again, starts with the second request.
    const Http1Result second = ReadHttp1Request(bytes.substr(first.consumed), limits);
    if (whole.requests.size() > 1) {
      FUZZ_CHECK(second.event == Http1Event::kRequest);
      FUZZ_CHECK(Same(second.request, whole.requests[1]));
    }
  } else {
    FUZZ_CHECK(first.event == whole.end);
    FUZZ_CHECK(first.error.status == whole.error.status);
    FUZZ_CHECK(first.error.message == whole.error.message);
  }

  // However the bytes arrive, the same requests.
  const bool cut_on_arrival =
      split.end == Http1Event::kError &&
      (split.error.status == 414 || split.error.message == "malformed chunk");
  if (cut_on_arrival) {
    // Refused on a line the one-go reading may have found whole and within its limit.
    FUZZ_CHECK(split.requests.size() <= whole.requests.size());
  } else {
    FUZZ_CHECK(split.requests.size() == whole.requests.size());
    FUZZ_CHECK(split.end == whole.end);
    const int a = split.error.status, b = whole.error.status;
    FUZZ_CHECK(a == b || ((a == 414 || a == 431) && (b == 414 || b == 431)));
    if (a == b) FUZZ_CHECK(split.error.message == whole.error.message);
  }
  for (size_t i = 0; i < split.requests.size() && i < whole.requests.size(); ++i) {
    FUZZ_CHECK(Same(split.requests[i], whole.requests[i]));
  }
  return 0;
}
