#include "server/leader_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/json.h"

namespace inac::server {

PortProbe ProbePort(const std::string& url, int timeout_ms) {
  std::string rest = url;
  if (size_t scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string host, port;
  if (!rest.empty() && rest[0] == '[') {  // [v6]:port
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return PortProbe::kUnknown;
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return PortProbe::kUnknown;
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return PortProbe::kUnknown;
  }
  PortProbe result = PortProbe::kUnknown;
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int rc = connect(fd, found->ai_addr, found->ai_addrlen);
    int error = rc == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, timeout_ms) == 1) {
        socklen_t len = sizeof(error);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = EIO;
      }
    }
    if (error == 0) result = PortProbe::kAccepted;
    if (error == ECONNREFUSED) result = PortProbe::kRefused;
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

bool LeaderProbe::Gone(const std::string& value) {
  if (value != value_) {
    value_ = value;
    accepted_ = false;
    refusals_ = 0;
  }
  core::Json j = core::Json::parse(value, nullptr, false);
  if (!j.is_object()) return false;
  switch (ProbePort(j.value("url", std::string()), timeout_ms_)) {
    case PortProbe::kAccepted:
      accepted_ = true;
      refusals_ = 0;
      return false;
    case PortProbe::kRefused:
      // Only a port seen accepting counts: a wrong advertise URL must not depose a live leader.
      return accepted_ && ++refusals_ >= 2;
    case PortProbe::kUnknown:
      refusals_ = 0;  // no answer is not a refusal: the TTL decides
      return false;
  }
  return false;
}

}  // namespace inac::server
