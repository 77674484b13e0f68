#include "http/http1_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace inac::http {
namespace {

// Debian's Abseil has its own string_view: the reader works on it and takes std's at its API.
absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A tchar (RFC 9110 section 5.6.2), or NUL: std::strchr finds a NUL at the end of the list, and
// the server has always let it through (see the header's "Kept as the server had them").
bool IsTokenChar(char c) {
  // (strchr finds the terminating NUL too: NUL is tested apart.)
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

// RFC 9110 section 5.5: CR, LF and NUL are never part of a field value; a recipient rejects
// them (a bare LF could end the line for a proxy in front of us and start a header of its own).
bool IsFieldValue(absl::string_view v) {
  return std::none_of(v.begin(), v.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// RFC 9112 section 3.2: a request target has no whitespace or control characters.
bool IsTarget(absl::string_view t) {
  return std::none_of(t.begin(), t.end(), [](char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
  });
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

size_t HeaderCount(const Http1Request& r, absl::string_view name) {
  return static_cast<size_t>(std::count_if(r.headers.begin(), r.headers.end(), [&](const auto& h) {
    return absl::EqualsIgnoreCase(h.first, name);
  }));
}

// The `index`-th value of header `name` up to its first NUL ("" when there is none), as
// cpp-httplib's Request::get_header_value returns it (through a C string).
absl::string_view FramingValue(const Http1Request& r, absl::string_view name, size_t index = 0) {
  for (const auto& [k, v] : r.headers) {
    if (!absl::EqualsIgnoreCase(k, name)) continue;
    if (index-- > 0) continue;
    absl::string_view value = v;
    return value.substr(0, value.find('\0'));
  }
  return {};
}

std::string BodyTooLarge(size_t max_body_bytes) {
  return absl::StrCat("request body is larger than ", max_body_bytes, " bytes");
}

}  // namespace

Http1Reader::Http1Reader(Http1Limits limits) : limits_(limits) {}

Http1Event Http1Reader::Fail(int status, std::string message) {
  phase_ = Phase::kFailed;
  error_ = Http1Error{status, std::move(message)};
  return Http1Event::kError;
}

Http1Request Http1Reader::TakeRequest() {
  Http1Request out = std::move(request_);
  Reset();
  return out;
}

void Http1Reader::Reset() {
  if (phase_ == Phase::kFailed) return;
  phase_ = Phase::kHead;
  request_ = Http1Request();
  remaining_ = 0;
  trailer_bytes_ = 0;
}

// The head without its final CRLF CRLF.
Http1Event Http1Reader::ReadHead(std::string_view head_bytes) {
  const absl::string_view head = View(head_bytes);
  const std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  const absl::string_view line = lines[0];
  if (line.size() > limits_.max_request_line_bytes) return Fail(414, "request URI is too long");
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !IsToken(parts[0])) return Fail(400, "malformed HTTP request line");
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
    if (absl::StartsWith(parts[2], "HTTP/")) {
      return Fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    }
    return Fail(400, "malformed HTTP request line");
  }
  const absl::string_view target = parts[1];
  if (target.empty() || target[0] != '/') return Fail(400, "the request target must be a path");
  if (!IsTarget(target)) return Fail(400, "control character in the request target");
  Http1Request& req = request_;
  req.method = std::string(parts[0]);
  req.version = std::string(parts[2]);
  req.target = std::string(target);
  if (lines.size() - 1 > limits_.max_headers) {
    return Fail(431, absl::StrCat("more than ", limits_.max_headers, " header lines"));
  }
  req.headers.reserve(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view h = lines[i];
    const size_t colon = h.find(':');
    // Not a token before the colon: no name, whitespace before the colon, or obs-fold (a line
    // that continues the previous one by starting with a space or a tab).
    if (colon == absl::string_view::npos || h[0] == ' ' || h[0] == '\t' ||
        !IsToken(h.substr(0, colon))) {
      return Fail(400, "malformed header line");
    }
    if (!IsFieldValue(h.substr(colon + 1))) {
      return Fail(400, "CR, LF or NUL in a header value");
    }
    req.headers.emplace_back(std::string(h.substr(0, colon)),
                             std::string(absl::StripAsciiWhitespace(h.substr(colon + 1))));
  }
  const std::string connection = absl::AsciiStrToLower(FramingValue(req, "Connection"));
  req.keep_alive = req.version == "HTTP/1.1" ? !absl::StrContains(connection, "close")
                                             : absl::StrContains(connection, "keep-alive");

  // The body's framing: the request-smuggling defences (RFC 9112 section 6.3).
  const size_t lengths = HeaderCount(req, "Content-Length");
  if (HeaderCount(req, "Transfer-Encoding") > 0) {
    if (lengths > 0) return Fail(400, "both Transfer-Encoding and Content-Length are set");
    if (!absl::EqualsIgnoreCase(FramingValue(req, "Transfer-Encoding"), "chunked")) {
      return Fail(501, "only the chunked transfer coding is served");
    }
    req.chunked = true;
    phase_ = Phase::kChunkSize;
  } else if (lengths > 0) {
    const absl::string_view v = FramingValue(req, "Content-Length");
    for (size_t i = 1; i < lengths; ++i) {
      if (FramingValue(req, "Content-Length", i) != v) {
        return Fail(400, "conflicting Content-Length headers");
      }
    }
    uint64_t n = 0;
    if (v.empty() || !std::all_of(v.begin(), v.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(v, &n)) {
      return Fail(400, "malformed Content-Length");
    }
    if (n > limits_.max_body_bytes) return Fail(413, BodyTooLarge(limits_.max_body_bytes));
    req.content_length = n;
    remaining_ = n;
    phase_ = n > 0 ? Phase::kBody : Phase::kHeadRead;
  } else {
    phase_ = Phase::kHeadRead;
  }
  req.expect_continue =
      req.has_body() && absl::EqualsIgnoreCase(FramingValue(req, "Expect"), "100-continue");
  return Http1Event::kHead;
}

Http1Event Http1Reader::Read(std::string_view in_bytes, size_t* consumed) {
  const absl::string_view in = View(in_bytes);
  size_t pos = 0;
  *consumed = 0;
  switch (phase_) {
    case Phase::kFailed:
      return Http1Event::kError;
    case Phase::kDone:  // the previous request was not taken: it is dropped
      Reset();
      break;
    case Phase::kHeadRead:
      phase_ = Phase::kDone;
      return Http1Event::kRequest;
    default:
      break;
  }
  // Every return below sets *consumed to pos first.
  auto done = [&](Http1Event event) {
    *consumed = pos;
    return event;
  };
  while (true) {
    absl::string_view rest = in.substr(pos);
    switch (phase_) {
      case Phase::kHead: {
        // A client may send empty lines between requests (RFC 9112 section 2.2).
        while (absl::StartsWith(rest, "\r\n")) {
          rest.remove_prefix(2);
          pos += 2;
        }
        if (rest.empty()) return done(Http1Event::kNeedMore);
        // The request line is judged first, however the bytes arrived: a long one is 414 (RFC
        // 9112 section 3), also when the whole head is over its own limit. Of a line whose end has
        // not arrived, a last CR does not count (its LF may be next).
        const size_t eol = rest.find("\r\n");
        const size_t line_bytes = eol != absl::string_view::npos ? eol
                                  : absl::EndsWith(rest, "\r")   ? rest.size() - 1
                                                                 : rest.size();
        if (line_bytes > limits_.max_request_line_bytes) {
          return done(Fail(414, "request URI is too long"));
        }
        const size_t end = rest.find("\r\n\r\n");
        if (end == absl::string_view::npos) {
          if (rest.size() > limits_.max_header_bytes) {
            return done(Fail(431, absl::StrCat("request headers are larger than ",
                                               limits_.max_header_bytes, " bytes")));
          }
          return done(Http1Event::kNeedMore);
        }
        if (end + 4 > limits_.max_header_bytes) {
          return done(Fail(431, absl::StrCat("request headers are larger than ",
                                             limits_.max_header_bytes, " bytes")));
        }
        pos += end + 4;
        return done(ReadHead(std::string_view(rest.data(), end)));
      }
      case Phase::kBody:
      case Phase::kChunkData: {
        if (rest.empty()) return done(Http1Event::kNeedMore);
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        request_.body.append(rest.data(), take);
        pos += take;
        remaining_ -= take;
        if (remaining_ > 0) return done(Http1Event::kNeedMore);
        if (phase_ == Phase::kBody) {
          phase_ = Phase::kDone;
          return done(Http1Event::kRequest);
        }
        phase_ = Phase::kChunkEnd;
        continue;
      }
      case Phase::kChunkEnd:
        if (rest.size() < 2) return done(Http1Event::kNeedMore);
        if (!absl::StartsWith(rest, "\r\n")) return done(Fail(400, "malformed chunked body"));
        pos += 2;
        phase_ = Phase::kChunkSize;
        continue;
      case Phase::kChunkSize:
      case Phase::kTrailer: {
        // One line each.
        const size_t eol = rest.find("\r\n");
        if (eol == absl::string_view::npos) {
          if (rest.size() > limits_.max_chunk_line_bytes) {
            return done(Fail(400, "malformed chunk"));
          }
          return done(Http1Event::kNeedMore);
        }
        const absl::string_view line = rest.substr(0, eol);
        pos += eol + 2;
        if (phase_ == Phase::kTrailer) {
          if (line.empty()) {
            phase_ = Phase::kDone;
            return done(Http1Event::kRequest);
          }
          trailer_bytes_ += line.size() + 2;
          if (trailer_bytes_ > limits_.max_header_bytes) {
            return done(Fail(431, "chunked trailer too large"));
          }
          continue;
        }
        const absl::string_view size_text =
            absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
        uint64_t size = 0;
        if (size_text.empty() || size_text.size() > 15 ||
            !std::all_of(size_text.begin(), size_text.end(), absl::ascii_isxdigit) ||
            !absl::SimpleHexAtoi(size_text, &size)) {
          return done(Fail(400, "malformed chunk size"));
        }
        if (size == 0) {
          phase_ = Phase::kTrailer;
          trailer_bytes_ = 0;
          continue;
        }
        if (request_.body.size() + size > limits_.max_body_bytes) {
          return done(Fail(413, BodyTooLarge(limits_.max_body_bytes)));
        }
        remaining_ = size;
        phase_ = Phase::kChunkData;
        continue;
      }
      case Phase::kHeadRead:
      case Phase::kDone:
      case Phase::kFailed:
        break;  // handled before the loop
    }
    return done(Http1Event::kNeedMore);  // not reached
  }
}

Http1Result ReadHttp1Request(std::string_view bytes, const Http1Limits& limits) {
  Http1Reader reader(limits);
  Http1Result result;
  size_t pos = 0;
  while (true) {
    size_t consumed = 0;
    const Http1Event event = reader.Read(bytes.substr(pos), &consumed);
    pos += consumed;
    switch (event) {
      case Http1Event::kHead:
        continue;
      case Http1Event::kRequest:
        result.event = Http1Event::kRequest;
        result.request = reader.TakeRequest();
        result.consumed = pos;
        return result;
      case Http1Event::kError:
        result.event = Http1Event::kError;
        result.error = reader.error();
        return result;
      case Http1Event::kNeedMore:
        return result;
    }
  }
}

}  // namespace inac::http
