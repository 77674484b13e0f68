// Crash detection of a cluster leader by its port (docs/ha.md, "Leadership"): a follower asks,
// every probe period, whether the leader it sees is certainly gone. A TCP connect to the port of
// the leader's advertised URL (nothing is sent) answers one of three things:
//   - accepted: the leader's process listens;
//   - refused (ECONNREFUSED): no process listens on that port of a host that is up -- the leader
//     exited or was killed (`inac serve` closes its port only after it revoked its lease,
//     cli/cmd_serve.cc, so a refusal never comes from a live leader);
//   - nothing within the timeout, or an address that does not resolve: unknown (a host down or
//     cut off), which decides nothing -- the lease's TTL does.
// LeaderProbe::Gone says true only after the port of that same leader (the same leader key value)
// was seen accepting once and then refused twice in a row: a wrong advertise URL, which never
// accepted, never deposes a live leader.
//
// Thread safety: one caller (the election thread).
#pragma once

#include <string>

namespace inac::server {

enum class PortProbe { kAccepted, kRefused, kUnknown };

// What a TCP connect to the host and port of `url` ("http(s)://host:port[/...]", "[v6]:port"
// allowed) says within `timeout_ms`.
PortProbe ProbePort(const std::string& url, int timeout_ms);

class LeaderProbe {
 public:
  explicit LeaderProbe(int timeout_ms = 100) : timeout_ms_(timeout_ms) {}
  // `value` is the leader key's value (JSON with "url"); a new value starts a new history.
  bool Gone(const std::string& value);

 private:
  int timeout_ms_;
  std::string value_;
  bool accepted_ = false;
  int refusals_ = 0;
};

}  // namespace inac::server
