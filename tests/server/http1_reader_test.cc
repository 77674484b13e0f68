// The HTTP/1.1 request reader (http/http1_reader.h) without a socket: Content-Length and chunked
// bodies, the request-smuggling refusals (both framings, other codings, conflicting lengths),
// obs-fold, versions, the size limits (414, 431, 413), pipelining leftovers and keep-alive, and
// the same requests whether the bytes arrive at once or one by one. The server's own tests
// (http_server_test.cc, bad_input_test.cc) check the same refusals over loopback.
#include "http/http1_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace inac::http {
namespace {

Http1Result ReadOne(std::string_view bytes, const Http1Limits& limits = {}) {
  return ReadHttp1Request(bytes, limits);
}

// The refusal's status and message ("" when `bytes` is not refused).
std::pair<int, std::string> Refusal(std::string_view bytes, const Http1Limits& limits = {}) {
  const Http1Result r = ReadOne(bytes, limits);
  if (r.event != Http1Event::kError) return {0, ""};
  return {r.error.status, r.error.message};
}

std::string Header(const Http1Request& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "<absent>";
}

// Every request in `bytes` and how the stream ends, read the way the server reads a connection
// whose bytes arrive `step` at a time (0: all at once).
struct Stream {
  std::vector<Http1Request> requests;
  Http1Event end = Http1Event::kNeedMore;  // kNeedMore or kError
  Http1Error error;
  size_t left = 0;  // bytes received and not consumed at the end
};
Stream ReadStream(std::string_view bytes, size_t step, const Http1Limits& limits = {}) {
  Http1Reader reader(limits);
  Stream out;
  std::string in;
  size_t fed = 0;
  bool head_seen = false;
  while (true) {
    size_t consumed = 0;
    const Http1Event e = reader.Read(in, &consumed);
    EXPECT_LE(consumed, in.size());
    in.erase(0, consumed);
    if (e == Http1Event::kHead) {
      EXPECT_FALSE(head_seen) << "two heads without a request";
      head_seen = true;
      continue;
    }
    if (e == Http1Event::kRequest) {
      EXPECT_TRUE(head_seen) << "a request without its head";
      head_seen = false;
      out.requests.push_back(reader.TakeRequest());
      continue;
    }
    if (e == Http1Event::kError) {
      out.end = e;
      out.error = reader.error();
      break;
    }
    if (fed == bytes.size()) break;
    const size_t n = step == 0 ? bytes.size() - fed : std::min(step, bytes.size() - fed);
    in.append(bytes.substr(fed, n));
    fed += n;
  }
  out.left = in.size();
  return out;
}

TEST(Http1ReaderTest, AGetWithoutABody) {
  const std::string get = "GET /a/b?q=1%202 HTTP/1.1\r\nHost: x\r\nX-Two:  spaced \t\r\n\r\n";
  Http1Result r = ReadOne(get);
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(r.consumed, get.size());
  EXPECT_EQ(r.request.method, "GET");
  EXPECT_EQ(r.request.target, "/a/b?q=1%202");  // not decoded: the server's business
  EXPECT_EQ(r.request.version, "HTTP/1.1");
  ASSERT_EQ(r.request.headers.size(), 2u);
  EXPECT_EQ(Header(r.request, "Host"), "x");
  EXPECT_EQ(Header(r.request, "X-Two"), "spaced");
  EXPECT_TRUE(r.request.keep_alive);
  EXPECT_FALSE(r.request.has_body());
  EXPECT_EQ(r.request.body, "");
  // Every prefix is incomplete, and consumes nothing.
  for (size_t n = 0; n < get.size(); ++n) {
    Http1Result part = ReadOne(std::string_view(get).substr(0, n));
    EXPECT_EQ(part.event, Http1Event::kNeedMore) << n;
    EXPECT_EQ(part.consumed, 0u);
  }
}

TEST(Http1ReaderTest, ContentLengthBodies) {
  const std::string post = "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  Http1Result r = ReadOne(post + "GET");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(r.request.body, "hello");
  EXPECT_EQ(r.request.content_length, 5u);
  EXPECT_EQ(r.consumed, post.size());  // the rest is the next request's
  EXPECT_EQ(ReadOne(post.substr(0, post.size() - 1)).event, Http1Event::kNeedMore);
  // Repeated equal lengths are one length; 0 is no body.
  r = ReadOne("POST /p HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(r.request.body, "ab");
  r = ReadOne("POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_FALSE(r.request.has_body());
  // Leading zeros are digits.
  EXPECT_EQ(ReadOne("POST /p HTTP/1.1\r\nContent-Length: 003\r\n\r\nabc").request.body, "abc");
}

TEST(Http1ReaderTest, ChunkedBodiesWithExtensionsAndTrailers) {
  const std::string chunked =
      "POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n A \r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
  Http1Result r = ReadOne(chunked + "leftover");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(r.request.body, "hello world0123456789");
  EXPECT_TRUE(r.request.chunked);
  EXPECT_EQ(r.request.content_length, 0u);
  EXPECT_EQ(r.consumed, chunked.size());
  EXPECT_EQ(ReadOne(chunked.substr(0, chunked.size() - 2)).event, Http1Event::kNeedMore);
  // Uppercase hex, and 15 digits are a size (this one then refused by the body limit).
  EXPECT_EQ(ReadOne("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n"
                    "0\r\n\r\n")
                .request.body,
            "0123456789");
  EXPECT_EQ(Refusal("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "FFFFFFFFFFFFFFF\r\n"),
            std::make_pair(413, std::string("request body is larger than 1048576 bytes")));
}

TEST(Http1ReaderTest, ChunkedRefusals) {
  const std::string head = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(Refusal(head + "zz\r\n"), std::make_pair(400, std::string("malformed chunk size")));
  EXPECT_EQ(Refusal(head + "\r\n").first, 400);                  // no size
  EXPECT_EQ(Refusal(head + "-1\r\n").first, 400);                // not hex
  EXPECT_EQ(Refusal(head + "0000000000000001\r\n").first, 400);  // 16 digits
  EXPECT_EQ(Refusal(head + "3\r\nabcX\r\n"),
            std::make_pair(400, std::string("malformed chunked body")));
  // A chunk line that does not end within the limit.
  EXPECT_EQ(Refusal(head + "5;" + std::string(1023, 'e')),
            std::make_pair(400, std::string("malformed chunk")));
  EXPECT_EQ(ReadOne(head + "5;" + std::string(1022, 'e')).event, Http1Event::kNeedMore);
  // The body limit counts the chunks' total.
  Http1Limits small;
  small.max_body_bytes = 10;
  EXPECT_EQ(ReadOne(head + "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", small).request.body,
            "helloworld");
  EXPECT_EQ(Refusal(head + "5\r\nhello\r\n6\r\n", small),
            std::make_pair(413, std::string("request body is larger than 10 bytes")));
  // Trailers are bounded by the header limit.
  small.max_header_bytes = 100;
  std::string trailers = head + "0\r\n";
  for (int i = 0; i < 10; ++i)
    absl::StrAppend(&trailers, "X-T", i, ": ", std::string(10, 'v'), "\r\n");
  EXPECT_EQ(Refusal(trailers, small),
            std::make_pair(431, std::string("chunked trailer too large")));
}

TEST(Http1ReaderTest, SmugglingFramingsAreRefused) {
  // Both framings: the one a proxy in front might pick is not knowable.
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            std::make_pair(400, std::string("both Transfer-Encoding and Content-Length are set")));
  EXPECT_EQ(
      Refusal("POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n").first,
      400);
  // Other codings, and a coding list ending in chunked, are not served.
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            std::make_pair(501, std::string("only the chunked transfer coding is served")));
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").first, 501);
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n").first, 501);
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n").first, 501);
  // Lengths that differ or are not plain digits.
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            std::make_pair(400, std::string("conflicting Content-Length headers")));
  for (const char* bad : {"lots", "+5", "-1", "0x10", "1 2", "1,1", "", "18446744073709551616"}) {
    EXPECT_EQ(Refusal(absl::StrCat("POST /b HTTP/1.1\r\nContent-Length: ", bad, "\r\n\r\n")),
              std::make_pair(400, std::string("malformed Content-Length")))
        << bad;
  }
  EXPECT_EQ(Refusal("POST /b HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n"),
            std::make_pair(413, std::string("request body is larger than 1048576 bytes")));
  EXPECT_EQ(ReadOne("POST /b HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n").event,
            Http1Event::kNeedMore);
}

TEST(Http1ReaderTest, MalformedHeadsAre400) {
  const std::string bad_line = "malformed HTTP request line";
  for (const char* head :
       {"GARBAGE\r\n\r\n", "GET /x\r\n\r\n", "GET  /x HTTP/1.1\r\n\r\n", "GET /x HTTP/1.1 \r\n\r\n",
        "G(T /x HTTP/1.1\r\n\r\n", " GET /x HTTP/1.1\r\n\r\n", "GET /x http/1.1\r\n\r\n",
        "GET /x HTTX/1.1\r\n\r\n", "GET /x 1.1\r\n\r\n"}) {
    EXPECT_EQ(Refusal(head), std::make_pair(400, bad_line)) << head;
  }
  for (const char* target : {"x", "*", "http://h/x", "?q"}) {
    EXPECT_EQ(Refusal(absl::StrCat("GET ", target, " HTTP/1.1\r\n\r\n")),
              std::make_pair(400, std::string("the request target must be a path")))
        << target;
  }
  // obs-fold (a line continued by a space or a tab), no colon, no name, space before the colon.
  for (const char* header : {" bad: fold", "\tbad: fold", "NoColon", ": no-name", "Host : x",
                             "Ho st: x", "X-A: 1\r\n  folded"}) {
    EXPECT_EQ(Refusal(absl::StrCat("GET /x HTTP/1.1\r\n", header, "\r\n\r\n")),
              std::make_pair(400, std::string("malformed header line")))
        << header;
  }
  // A header with an empty value is a header.
  EXPECT_EQ(Header(ReadOne("GET /x HTTP/1.1\r\nX-Empty:\r\n\r\n").request, "X-Empty"), "");
}

TEST(Http1ReaderTest, VersionsOtherThan10And11Are505) {
  for (const char* version : {"HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/", "HTTP/1.1x"}) {
    EXPECT_EQ(Refusal(absl::StrCat("GET /x ", version, "\r\n\r\n")),
              std::make_pair(505, std::string("only HTTP/1.0 and HTTP/1.1 are served")))
        << version;
  }
  Http1Result r = ReadOne("GET /x HTTP/1.0\r\n\r\n");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(r.request.version, "HTTP/1.0");
}

TEST(Http1ReaderTest, LongLinesAndLargeHeads) {
  Http1Limits limits;
  limits.max_request_line_bytes = 64;
  limits.max_header_bytes = 256;
  limits.max_headers = 4;
  const std::pair<int, std::string> uri_too_long{414, "request URI is too long"};
  const std::pair<int, std::string> too_large{431, "request headers are larger than 256 bytes"};
  // The request line: 64 bytes pass, 65 are 414, complete or not.
  const std::string line64 = "GET /" + std::string(64 - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(line64.size(), 64u);
  EXPECT_EQ(ReadOne(line64 + "\r\n\r\n", limits).event, Http1Event::kRequest);
  EXPECT_EQ(Refusal("GET /a" + line64.substr(5) + "\r\n\r\n", limits), uri_too_long);
  EXPECT_EQ(ReadOne(line64, limits).event, Http1Event::kNeedMore);
  EXPECT_EQ(Refusal(line64 + "a", limits), uri_too_long);  // no CRLF yet: cut at the limit
  // The head: 256 bytes with its CRLF CRLF pass, 257 are 431, complete or not.
  std::string head = "GET /x HTTP/1.1\r\nX-Pad: ";
  head += std::string(256 - head.size() - 4, 'p');
  EXPECT_EQ(ReadOne(head + "\r\n\r\n", limits).event, Http1Event::kRequest);
  EXPECT_EQ(Refusal(head + "p\r\n\r\n", limits), too_large);
  EXPECT_EQ(ReadOne(head + "\r\n\r", limits).event, Http1Event::kNeedMore);
  EXPECT_EQ(ReadOne(head + "pppp", limits).event, Http1Event::kNeedMore);
  EXPECT_EQ(Refusal(head + "ppppp", limits), too_large);
  // Header lines: 4 pass, 5 are 431.
  std::string four = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 4; ++i) absl::StrAppend(&four, "X-", i, ": v\r\n");
  EXPECT_EQ(ReadOne(four + "\r\n", limits).event, Http1Event::kRequest);
  EXPECT_EQ(Refusal(four + "X-4: v\r\n\r\n", limits),
            std::make_pair(431, std::string("more than 4 header lines")));
  // The defaults are the server's.
  EXPECT_EQ(Refusal("GET /" + std::string(8192, 'a') + " HTTP/1.1\r\n\r\n").first, 414);
  EXPECT_EQ(Refusal("GET /x HTTP/1.1\r\nX-Big: " + std::string(16384, 'a')).first, 431);
}

TEST(Http1ReaderTest, PipelinedRequestsAndLeftovers) {
  const std::string stream =
      "\r\n\r\nGET /one HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /two HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
      "\r\nPOST /three HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"
      "GET /four HTTP/1.1\r\nConnection: close\r\n\r\n"
      "GET /fi";
  for (size_t step : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{64}}) {
    Stream s = ReadStream(stream, step);
    ASSERT_EQ(s.requests.size(), 4u) << "step " << step;
    EXPECT_EQ(s.requests[0].target, "/one");
    EXPECT_EQ(s.requests[1].body, "abc");
    EXPECT_EQ(s.requests[2].target, "/three");
    EXPECT_EQ(s.requests[2].body, "de");
    EXPECT_EQ(s.requests[3].target, "/four");
    EXPECT_FALSE(s.requests[3].keep_alive);
    EXPECT_EQ(s.end, Http1Event::kNeedMore);
    EXPECT_EQ(s.left, 7u) << "step " << step;  // "GET /fi": the next head, not consumed yet
  }
  // One at a time: each request's consumed bytes are where the next one starts.
  std::string_view rest = stream;
  std::vector<std::string> targets;
  while (true) {
    Http1Result r = ReadOne(rest);
    if (r.event != Http1Event::kRequest) break;
    targets.push_back(r.request.target);
    rest.remove_prefix(r.consumed);
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"/one", "/two", "/three", "/four"}));
  EXPECT_EQ(rest, "GET /fi");
}

TEST(Http1ReaderTest, KeepAliveByVersionAndConnection) {
  auto keep_alive = [](const std::string& version, const std::string& connection) {
    std::string req = absl::StrCat("GET /x ", version, "\r\n");
    if (!connection.empty()) absl::StrAppend(&req, "Connection: ", connection, "\r\n");
    return ReadOne(req + "\r\n").request.keep_alive;
  };
  EXPECT_TRUE(keep_alive("HTTP/1.1", ""));
  EXPECT_TRUE(keep_alive("HTTP/1.1", "keep-alive"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "close"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "Upgrade, CLOSE"));
  EXPECT_FALSE(keep_alive("HTTP/1.0", ""));
  EXPECT_TRUE(keep_alive("HTTP/1.0", "Keep-Alive"));
  // Only the first Connection header counts.
  EXPECT_TRUE(
      ReadOne("GET /x HTTP/1.1\r\nConnection: a\r\nConnection: close\r\n\r\n").request.keep_alive);
}

TEST(Http1ReaderTest, HeadThenBodyAndExpectContinue) {
  Http1Reader reader;
  EXPECT_TRUE(reader.reading_head());
  std::string in = "POST /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-Continue\r\n\r\nab";
  size_t consumed = 0;
  ASSERT_EQ(reader.Read(in, &consumed), Http1Event::kHead);
  EXPECT_EQ(consumed, in.size() - 2);
  in.erase(0, consumed);
  EXPECT_TRUE(reader.request().expect_continue);
  EXPECT_EQ(reader.request().method, "POST");
  EXPECT_FALSE(reader.reading_head());  // the body timeout applies
  ASSERT_EQ(reader.Read(in, &consumed), Http1Event::kNeedMore);
  EXPECT_EQ(consumed, 2u);  // body bytes are taken as they come
  in = "cd";
  ASSERT_EQ(reader.Read(in, &consumed), Http1Event::kRequest);
  EXPECT_EQ(consumed, 2u);
  EXPECT_EQ(reader.TakeRequest().body, "abcd");
  EXPECT_TRUE(reader.reading_head());
  // Without a body, kHead then kRequest with nothing more consumed; Expect is moot.
  in = "GET /g HTTP/1.1\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(reader.Read(in, &consumed), Http1Event::kHead);
  EXPECT_FALSE(reader.request().expect_continue);
  ASSERT_EQ(reader.Read(std::string_view(in).substr(consumed), &consumed), Http1Event::kRequest);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(reader.TakeRequest().target, "/g");
  // Reset drops a request in progress (a refused head).
  ASSERT_EQ(reader.Read("POST /r HTTP/1.1\r\nContent-Length: 9\r\n\r\n", &consumed),
            Http1Event::kHead);
  reader.Reset();
  ASSERT_EQ(reader.Read("GET /next HTTP/1.1\r\n\r\n", &consumed), Http1Event::kHead);
  EXPECT_EQ(reader.request().target, "/next");
}

TEST(Http1ReaderTest, AfterARefusalNothingMoreIsRead) {
  Http1Reader reader;
  size_t consumed = 1;
  ASSERT_EQ(reader.Read("GET /x HTTP/2.0\r\n\r\nGET /y HTTP/1.1\r\n\r\n", &consumed),
            Http1Event::kError);
  EXPECT_EQ(reader.error().status, 505);
  ASSERT_EQ(reader.Read("GET /y HTTP/1.1\r\n\r\n", &consumed), Http1Event::kError);
  EXPECT_EQ(consumed, 0u);
  reader.Reset();  // a refusal is final
  EXPECT_EQ(reader.Read("GET /y HTTP/1.1\r\n\r\n", &consumed), Http1Event::kError);
}

TEST(Http1ReaderTest, TheSameRequestsHoweverTheBytesArrive) {
  Http1Limits limits;
  limits.max_body_bytes = 64;
  const std::vector<std::string> streams = {
      "PUT /a HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789GET /b HTTP/1.0\r\n\r\n",
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;a=b\r\nx\r\n3\r\nyzw\r\n"
      "0\r\nT: 1\r\nU: 2\r\n\r\n\r\nDELETE /d?x HTTP/1.1\r\n\r\n",
      "POST /e HTTP/1.1\r\nContent-Length: 65\r\n\r\n",
      "GET /f HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\n bad\r\n\r\n",
  };
  for (const std::string& stream : streams) {
    const Stream whole = ReadStream(stream, 0, limits);
    for (size_t step = 1; step <= 5; ++step) {
      const Stream split = ReadStream(stream, step, limits);
      ASSERT_EQ(split.requests.size(), whole.requests.size()) << stream << " step " << step;
      for (size_t i = 0; i < whole.requests.size(); ++i) {
        EXPECT_EQ(split.requests[i].target, whole.requests[i].target);
        EXPECT_EQ(split.requests[i].headers, whole.requests[i].headers);
        EXPECT_EQ(split.requests[i].body, whole.requests[i].body);
        EXPECT_EQ(split.requests[i].keep_alive, whole.requests[i].keep_alive);
      }
      EXPECT_EQ(split.end, whole.end);
      EXPECT_EQ(split.error.status, whole.error.status);
      EXPECT_EQ(split.error.message, whole.error.message);
    }
  }
}

// What the reader keeps of the server's behaviour although RFC 9110/9112 would refuse it (the
// header's "Kept as the server had them"): pinned here so that tightening it is a decision.
TEST(Http1ReaderTest, ControlCharactersInTokensValuesAndTargetsAre400) {
  using namespace std::string_literals;
  // A bare LF inside a header value (a proxy may end the line there), CR and NUL: 400.
  EXPECT_EQ(Refusal("GET /x HTTP/1.1\r\nX-A: 1\nTransfer-Encoding: gzip\r\n\r\n"),
            std::make_pair(400, std::string("CR, LF or NUL in a header value")));
  EXPECT_EQ(Refusal("GET /x HTTP/1.1\r\nX-A: 1\rX-B: 2\r\n\r\n").first, 400);
  EXPECT_EQ(Refusal("POST /x HTTP/1.1\r\nContent-Length: 2\0junk\r\n\r\nab"s).first, 400);
  // NUL is not a token character (method or header name).
  EXPECT_EQ(Refusal("G\0T /x HTTP/1.1\r\n\r\n"s).first, 400);
  EXPECT_EQ(Refusal("GET /x HTTP/1.1\r\nX\0A: 1\r\n\r\n"s).first, 400);
  // Control characters in the target, raw (percent-encoded ones are the router's business).
  for (char c : {'\x01', '\x1b', '\x7f', '\t', '\0'}) {
    EXPECT_EQ(Refusal("GET /a"s + c + "b HTTP/1.1\r\n\r\n").first, 400) << static_cast<int>(c);
  }
  EXPECT_EQ(ReadOne("GET /a%0Ab HTTP/1.1\r\n\r\n").event, Http1Event::kRequest);
  // Tabs and other visible bytes stay fine in a value.
  Http1Result r = ReadOne("GET /x HTTP/1.1\r\nX-A: a\tb \xc3\xa9\r\n\r\n");
  ASSERT_EQ(r.event, Http1Event::kRequest);
  EXPECT_EQ(Header(r.request, "X-A"), "a\tb \xc3\xa9");
}

TEST(Http1ReaderTest, QuirksKeptFromTheServer) {
  // Only the first Transfer-Encoding header is looked at.
  Http1Result r = ReadOne(
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n"
      "0\r\n\r\n");
  EXPECT_EQ(r.event, Http1Event::kRequest);
  // A chunk-size line over the limit passes when its CRLF came with it, not when it came later.
  const std::string long_line = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
                                std::string(2000, 'e') + "\r\nx\r\n0\r\n\r\n";
  EXPECT_EQ(ReadStream(long_line, 0).requests.size(), 1u);
  EXPECT_EQ(ReadStream(long_line, 512).error.message, "malformed chunk");
}

// The request line is judged the same however its bytes arrive: 414 when it is over the limit,
// also when the whole head is over its own limit too (431 otherwise), and a line of exactly the
// limit passes even when its CR arrives without its LF.
TEST(Http1ReaderTest, ALongRequestLineIs414HoweverItArrives) {
  Http1Limits limits;
  limits.max_request_line_bytes = 64;
  limits.max_header_bytes = 128;
  const std::string line64 = "GET /" + std::string(64 - 14, 'a') + " HTTP/1.1";
  const std::string line100 = "GET /" + std::string(100 - 14, 'a') + " HTTP/1.1";
  const std::string big_header = "X-Pad: " + std::string(200, 'p') + "\r\n";
  for (size_t step : {0, 1, 7, 64, 65, 66, 100, 101, 102, 4096}) {
    EXPECT_EQ(ReadStream(line64 + "\r\n\r\n", step, limits).requests.size(), 1u) << step;
    EXPECT_EQ(ReadStream(line100 + "\r\n\r\n", step, limits).error.status, 414) << step;
    EXPECT_EQ(ReadStream(line100 + "\r\n" + big_header + "\r\n", step, limits).error.status, 414)
        << step;
    EXPECT_EQ(ReadStream(line64 + "\r\n" + big_header + "\r\n", step, limits).error.status, 431)
        << step;
  }
  // The defaults: an 8 KiB + 1 line with 16 KiB of headers, in one piece, is 414.
  EXPECT_EQ(Refusal("GET /" + std::string(8192, 'a') +
                    " HTTP/1.1\r\nX-Big: " + std::string(16384, 'b') + "\r\n\r\n")
                .first,
            414);
}

}  // namespace
}  // namespace inac::http
