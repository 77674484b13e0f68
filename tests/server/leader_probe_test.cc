// LeaderProbe (server/leader_probe.h) on loopback with real sockets: a listening port is accepted,
// a closed one refused, and a leader counts as gone only after its port accepted once and then
// refused twice; a URL that never accepted, or that does not resolve, never says gone.
#include "server/leader_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace inac::server {
namespace {

// A listening TCP socket on 127.0.0.1 with a kernel-chosen port; Close() stops listening.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  std::string value() const {
    return absl::StrCat(R"({"node_id":"a","url":")", url(), R"(","epoch":1})");
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(LeaderProbeTest, AListeningPortIsAcceptedAndAClosedOneRefused) {
  Listener l;
  EXPECT_EQ(ProbePort(l.url(), 500), PortProbe::kAccepted);
  EXPECT_EQ(ProbePort(l.url() + "/api/v1", 500), PortProbe::kAccepted);
  l.Close();
  EXPECT_EQ(ProbePort(l.url(), 500), PortProbe::kRefused);
  EXPECT_EQ(ProbePort("http://no-such-host.invalid:80", 500), PortProbe::kUnknown);
  EXPECT_EQ(ProbePort("not a url", 500), PortProbe::kUnknown);
}

TEST(LeaderProbeTest, GoneOnlyAfterTheSamePortAcceptedThenRefusedTwice) {
  Listener l;
  const std::string value = l.value();
  LeaderProbe probe(500);
  EXPECT_FALSE(probe.Gone(value));  // accepted
  l.Close();
  EXPECT_FALSE(probe.Gone(value));  // one refusal
  EXPECT_TRUE(probe.Gone(value));   // two in a row
}

TEST(LeaderProbeTest, APortThatNeverAcceptedNeverDeposes) {
  Listener l;
  const std::string value = l.value();
  l.Close();
  LeaderProbe probe(500);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(probe.Gone(value));
  // A new leader value starts a new history: its acceptance is needed first.
  Listener other;
  LeaderProbe again(500);
  EXPECT_FALSE(again.Gone(other.value()));
  EXPECT_FALSE(again.Gone(value));  // another value: refused, never accepted
  EXPECT_FALSE(again.Gone(value));
  EXPECT_FALSE(again.Gone("not json"));
}

}  // namespace
}  // namespace inac::server
