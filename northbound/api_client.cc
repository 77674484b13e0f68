#include "northbound/api_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <signal.h>

#include <ctime>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/files.h"
#include "http/tls_context.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "ApiClient needs cpp-httplib's HTTPS client (CPPHTTPLIB_OPENSSL_SUPPORT)"
#endif

namespace inac::northbound {

namespace {

using Json = nlohmann::json;

// The API's error codes (snake_case canonical names, northbound/http_api.cc) back to absl codes.
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

// The member `name` of the `error` object of an API error body, or "".
std::string ErrorMember(const Json& body, const char* name) {
  if (!body.is_object()) return "";
  auto e = body.find("error");
  if (e == body.end() || !e->is_object()) return "";
  auto m = e->find(name);
  return m != e->end() && m->is_string() ? m->get<std::string>() : "";
}

// OK when `path` is a readable file holding at least one PEM certificate.
absl::Status CheckCaFile(const std::string& path) {
  auto text = core::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--ca-cert: ", text.status().message()));
  }
  BIO* bio = BIO_new_mem_buf(text->data(), static_cast<int>(text->size()));
  int certificates = 0;
  while (bio != nullptr) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    X509_free(cert);
    ++certificates;
  }
  BIO_free(bio);
  http::DrainOpenSslErrors();  // the end of the file reads as "no start line"
  if (certificates == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ca-cert: ", path, " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  return absl::OkStatus();
}

// Blocks SIGPIPE in this thread for its lifetime. cpp-httplib 0.11 writes requests without
// MSG_NOSIGNAL, so a server that answers and closes before reading a whole body (413 on a large
// upload) would kill the calling process with SIGPIPE; with the signal blocked the write fails
// with EPIPE and the call reports it. A SIGPIPE raised meanwhile (thread-directed, by our own
// write) is consumed before the old mask returns, unless one was pending or blocked before
// (libpq's pq_block_sigpipe does the same).
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    consume_ = !sigismember(&old_, SIGPIPE) && !sigismember(&pending, SIGPIPE);
  }
  ~ScopedSigpipeBlock() {
    if (consume_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool consume_ = false;
};

}  // namespace

std::string RawReply::error_code() const { return ErrorMember(json, "code"); }
std::string RawReply::error_message() const { return ErrorMember(json, "message"); }
std::string RawReply::error_field() const { return ErrorMember(json, "field"); }

struct ApiClient::Impl {
  explicit Impl(const std::string& base) : client(base) {}

  // The httplib form of `request`: body and Content-Type by RawRequest's rule, the token unless
  // the request names its own Authorization.
  httplib::Request ToHttplib(const RawRequest& request) const {
    httplib::Request req;
    req.method = request.method;
    req.path = request.target;
    for (const auto& [k, v] : request.headers) req.headers.emplace(k, v);
    if (!token.empty() && !req.has_header("Authorization")) {
      req.headers.emplace("Authorization", absl::StrCat("Bearer ", token));
    }
    const std::string& m = request.method;
    if (!request.body.empty() || m == "POST" || m == "PUT" || m == "PATCH") {
      req.body = request.body;
      if (!req.has_header("Content-Type")) {
        req.headers.emplace("Content-Type", request.content_type);
      }
    }
    return req;
  }

  absl::Status Unreachable(httplib::Error error) const {
    // cpp-httplib names its errors in one word ("Connection"); say what happened.
    std::string what;
    switch (error) {
      case httplib::Error::Connection:
        what =
            "could not connect (connection refused, or no route to the host); is `inac serve` "
            "running there?";
        break;
      case httplib::Error::ConnectionTimeout:
        what = "timed out while connecting";
        break;
      case httplib::Error::Read:
        what = "the connection broke (or timed out) while reading the answer";
        break;
      case httplib::Error::Write:
        what = "the connection broke while sending the request";
        break;
      case httplib::Error::SSLServerVerification: {
        // cpp-httplib checks the host name itself, after OpenSSL verified the chain: a chain
        // that verified means the name was wrong.
        const long result = client.get_openssl_verify_result();
        what = absl::StrCat(
            "certificate verify failed: ",
            result == X509_V_OK || result == X509_V_ERR_HOSTNAME_MISMATCH ||
                    result == X509_V_ERR_IP_ADDRESS_MISMATCH
                ? absl::StrCat("hostname mismatch (the certificate does not name ", host, ")")
                : X509_verify_cert_error_string(result),
            ca_cert_file.empty()
                ? " (the server's certificate is not signed by a CA of the system's trust store; "
                  "pass its CA with --ca-cert FILE or $INAC_CA_CERT)"
                : absl::StrCat(" (trusted CAs: ", ca_cert_file,
                               "; the server's host name or IP address must be in its "
                               "certificate)"));
        break;
      }
      case httplib::Error::SSLConnection:
        what =
            "the TLS handshake failed (is the server serving HTTPS on that port? `inac serve` "
            "without a certificate serves http://)";
        break;
      case httplib::Error::SSLLoadingCerts:
        what = absl::StrCat("cannot load the CA certificates ",
                            ca_cert_file.empty() ? "of the system" : ca_cert_file);
        break;
      default:
        what = httplib::to_string(error);
    }
    return absl::UnavailableError(absl::StrCat("cannot reach ", server, ": ", what));
  }

  httplib::Client client;
  std::string server;
  std::string token;
  std::string ca_cert_file;  // https only
  std::string host;          // as in the URL (for messages)
};

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(const ApiClientOptions& options) {
  const std::string& s = options.server;
  const bool https = absl::StartsWith(s, "https://");
  const size_t host_at = https ? 8 : 7;
  if ((!https && !absl::StartsWith(s, "http://")) || s.size() <= host_at || s[host_at] == '/' ||
      s[host_at] == ':') {
    return absl::InvalidArgumentError(absl::StrCat(
        "--server: \"", s, "\" is not an http:// or https:// URL (e.g. http://127.0.0.1:8080)"));
  }
  std::string base = s;
  while (base.size() > host_at && base.back() == '/') base.pop_back();
  if (base.find('/', host_at) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server: \"", s, "\" must be scheme://host[:port] without a path"));
  }
  auto impl = std::make_unique<Impl>(base);
  if (!impl->client.is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("--server: cannot use \"", s, "\""));
  }
  impl->server = base;
  impl->token = options.token;
  impl->host = base.substr(host_at);
  if (const size_t colon = impl->host.rfind(':');
      colon != std::string::npos && impl->host.back() != ']') {
    impl->host.resize(colon);  // without the port
  }
  if (https) {
    impl->client.enable_server_certificate_verification(true);
    // OpenSSL checks the server's name (an IP address against the certificate's IP SANs, a name
    // against its DNS SANs) while it verifies the chain. cpp-httplib 0.11's own check after the
    // handshake compares an IPv4 host against an uninitialised IPv6 buffer too, so on its own it
    // can accept a certificate that does not name the host.
    std::string name = impl->host;
    if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
      name = name.substr(1, name.size() - 2);
    }
    X509_VERIFY_PARAM* param = SSL_CTX_get0_param(impl->client.ssl_context());
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1 &&
        X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--server: cannot verify a certificate for host \"", name, "\""));
    }
    if (!options.ca_cert_file.empty()) {
      if (auto s = CheckCaFile(options.ca_cert_file); !s.ok()) return s;
      impl->ca_cert_file = options.ca_cert_file;
      impl->client.set_ca_cert_path(options.ca_cert_file);
    }
  }
  const time_t seconds = options.timeout_ms / 1000;
  const time_t micros = (options.timeout_ms % 1000) * 1000;
  impl->client.set_connection_timeout(seconds, micros);
  impl->client.set_read_timeout(seconds, micros);
  impl->client.set_write_timeout(seconds, micros);
  impl->client.set_keep_alive(options.keep_alive);
  // Requests are small request-reply exchanges: no Nagle delay between the header and body writes.
  impl->client.set_tcp_nodelay(true);
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

absl::StatusOr<RawReply> ApiClient::SendRaw(const RawRequest& request) {
  httplib::Request req = impl_->ToHttplib(request);
  ScopedSigpipeBlock no_sigpipe;
  httplib::Result r = impl_->client.send(req);
  if (!r) return impl_->Unreachable(r.error());
  RawReply reply;
  reply.http_status = r->status;
  for (const auto& [k, v] : r->headers) reply.headers.emplace(k, v);
  reply.body = std::move(r->body);
  if (!reply.body.empty()) {
    reply.json = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  }
  return reply;
}

absl::StatusOr<int> ApiClient::Stream(const RawRequest& request,
                                      const std::function<bool(const RawReply& head)>& on_head,
                                      const std::function<bool(std::string_view data)>& on_data) {
  httplib::Request req = impl_->ToHttplib(request);
  int status = 0;
  auto head = [&](const httplib::Response& res) {
    status = res.status;
    if (!on_head) return true;
    RawReply h;
    h.http_status = res.status;
    for (const auto& [k, v] : res.headers) h.headers.emplace(k, v);
    return on_head(h);
  };
  req.response_handler = head;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    return !on_data || on_data(std::string_view(data, n));
  };
  ScopedSigpipeBlock no_sigpipe;
  httplib::Result r = impl_->client.send(req);
  if (r && status == 0) {
    head(*r);  // cpp-httplib skips the response handler for a reply without a body (204, HEAD)
    status = r->status;
  }
  if (status == 0) return impl_->Unreachable(r.error());
  return status;
}

absl::StatusOr<ApiReply> ApiClient::Call(
    const std::string& method, const std::string& path, const Json& body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  if (method != "GET" && method != "DELETE" && method != "POST" && method != "PUT" &&
      method != "PATCH") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported method ", method));
  }
  RawRequest request;
  request.method = method;
  request.target = "/api/v1" + path;
  if (method != "GET" && !body.is_null()) request.body = body.dump();
  request.headers = headers;
  auto raw = SendRaw(request);
  if (!raw.ok()) return raw.status();
  ApiReply reply;
  reply.http_status = raw->http_status;
  if (raw->json.is_discarded()) {
    return absl::InternalError(absl::StrCat("HTTP ", raw->http_status, " from ", impl_->server, " ",
                                            method, " ", request.target, ": the body is not JSON"));
  }
  if (reply.http_status >= 200 && reply.http_status < 300) {
    reply.body = std::move(raw->json);
    return reply;
  }

  const std::string code = raw->error_code(), message = raw->error_message(),
                    field = raw->error_field();
  std::string text = absl::StrCat("HTTP ", reply.http_status, code.empty() ? "" : " ", code,
                                  message.empty() ? "" : ": ", message);
  if (!field.empty()) absl::StrAppend(&text, " [field ", field, "]");
  if (reply.http_status >= 500) return absl::InternalError(text);
  return absl::Status(CodeFromName(code, reply.http_status), text);
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

}  // namespace inac::northbound
