// The real `inac switch` process: port 0 and the `listening on` line, a P4Runtime round trip,
// clean exit on SIGTERM, exit code 2 for a bad P4Info file. Needs the `inac` binary of the same
// build (INAC_BINARY); skipped when it has not been built.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "google/rpc/code.pb.h"
#include "p4/v1/p4runtime.grpc.pb.h"

namespace {

#ifdef INAC_BINARY
constexpr char kBinary[] = INAC_BINARY;
#else
constexpr char kBinary[] = "";
#endif

// A child process running `inac switch ...`, its stdout on a pipe.
class SwitchProcess {
 public:
  explicit SwitchProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(kBinary));
      argv.push_back(const_cast<char*>("switch"));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kBinary, argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~SwitchProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) fclose(out_);
  }

  // The next stdout line ("" at end of output).
  std::string Line() {
    std::string line;
    int c;
    while (out_ != nullptr && (c = fgetc(out_)) != EOF && c != '\n') line.push_back(char(c));
    return line;
  }
  // Sends `signal` (0: none) and returns the exit status (-1 if it did not exit normally).
  int Stop(int signal) {
    if (signal != 0) kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  bool reaped_ = false;
};

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // hang guard
  return ctx;
}

TEST(SwitchProcessTest, ServesP4RuntimeAndStopsCleanly) {
  if (access(kBinary, X_OK) != 0) GTEST_SKIP() << "inac binary not built";
  SwitchProcess proc({"--listen", "127.0.0.1:0", "--device-id", "5", "--p4info",
                      std::string(INAC_P4_DIR) + "/ina.p4info.txtpb"});
  std::string line = proc.Line();
  const std::string prefix = "listening on 127.0.0.1:";
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
  int port = std::stoi(line.substr(prefix.size()));
  ASSERT_GT(port, 0);

  auto stub = p4::v1::P4Runtime::NewStub(
      grpc::CreateChannel(line.substr(13), grpc::InsecureChannelCredentials()));
  auto stream_ctx = Context();
  auto stream = stub->StreamChannel(stream_ctx.get());
  p4::v1::StreamMessageRequest arb;
  arb.mutable_arbitration()->set_device_id(5);
  arb.mutable_arbitration()->mutable_election_id()->set_low(1);
  ASSERT_TRUE(stream->Write(arb));
  p4::v1::StreamMessageResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.arbitration().status().code(), google::rpc::OK);

  p4::v1::WriteRequest write;
  write.set_device_id(5);
  write.mutable_election_id()->set_low(1);
  auto* u = write.add_updates();
  u->set_type(p4::v1::Update::INSERT);
  auto* g = u->mutable_entity()
                ->mutable_packet_replication_engine_entry()
                ->mutable_multicast_group_entry();
  g->set_multicast_group_id(12);
  g->add_replicas()->set_port(std::string(1, '\x03'));
  p4::v1::WriteResponse wr;
  grpc::Status ws = stub->Write(Context().get(), write, &wr);
  ASSERT_TRUE(ws.ok()) << ws.error_message();

  p4::v1::ReadRequest read;
  read.set_device_id(5);
  read.add_entities()->mutable_packet_replication_engine_entry()->mutable_multicast_group_entry();
  auto read_ctx = Context();
  auto reader = stub->Read(read_ctx.get(), read);
  p4::v1::ReadResponse rr;
  int groups = 0;
  while (reader->Read(&rr)) groups += rr.entities_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(groups, 1);

  // SIGTERM with a client still connected: the switch cancels the stream and exits 0.
  EXPECT_EQ(proc.Stop(SIGTERM), 0);
  EXPECT_FALSE(stream->Read(&answer));
  stream->Finish();
}

TEST(SwitchProcessTest, BadP4InfoFileIsExit2) {
  if (access(kBinary, X_OK) != 0) GTEST_SKIP() << "inac binary not built";
  SwitchProcess missing({"--listen", "127.0.0.1:0", "--p4info", "/nonexistent/ina.p4info"});
  EXPECT_EQ(missing.Stop(0), 2);
  // A P4Info that parses but fails verification (the .p4 source is not a P4Info).
  SwitchProcess wrong(
      {"--listen", "127.0.0.1:0", "--p4info", std::string(INAC_P4_DIR) + "/ina.p4"});
  EXPECT_EQ(wrong.Stop(0), 2);
}

}  // namespace
