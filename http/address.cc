#include "http/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inac::http {

absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("expected host:port, got \"", listen, "\""));
  }
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (!absl::SimpleAtoi(listen.substr(colon + 1), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in \"", listen, "\""));
  }
  return absl::OkStatus();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  // Address literals only: "127.evil.example" is a name, not 127.0.0.0/8.
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace inac::http
