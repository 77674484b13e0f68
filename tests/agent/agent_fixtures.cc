#include "agent_fixtures.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace inac::agent::testing {

uint32_t Loopback(int a, int b, int host) {
  return (127u << 24) | (static_cast<uint32_t>(a) << 16) | (static_cast<uint32_t>(b) << 8) |
         static_cast<uint32_t>(host);
}

uint16_t PickUdpPort() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

JobConfig::Tag DirectTag(uint32_t tag, const std::string& ps, uint32_t ps_address, double share,
                         double begin, double end, const std::vector<std::string>& workers,
                         const std::vector<uint32_t>& worker_addresses) {
  JobConfig::Tag t;
  t.tag = tag;
  t.ps = ps;
  t.ps_address = ps_address;
  t.share = share;
  t.begin = begin;
  t.end = end;
  for (size_t i = 0; i < workers.size(); ++i) {
    t.members.push_back({workers[i], worker_addresses[i], ps});
  }
  return t;
}

}  // namespace inac::agent::testing
