// The threads of one PS (agent/ps_threads.h): the group they share (datagrams handed to a
// chunk's owner, iterations merged), the kernel's steering of each datagram to its chunk's thread
// (Ps::SteerToOwners, a classic BPF program on the SO_REUSEPORT group) and the run of all of them.
#include "agent/ps_threads.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "agent/clock.h"
#include "agent/layout.h"
#include "agent/ps_state.h"

namespace inac::agent {

PsGroup::PsGroup(int threads, const PsOptions& options)
    : options_(options), inbox_(static_cast<size_t>(threads)) {
  for (Inbox& in : inbox_) in.fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  merge_.resize(static_cast<size_t>(options.iterations));
}

PsGroup::~PsGroup() {
  for (Inbox& in : inbox_) {
    if (in.fd >= 0) ::close(in.fd);
  }
}

void PsGroup::HandOff(int thread, const DatagramView& d) {
  Inbox& in = inbox_[static_cast<size_t>(thread)];
  {
    absl::MutexLock lock(&mu_);
    Datagram& copy = in.datagrams.emplace_back();
    copy.source = d.source;
    copy.source_port = d.source_port;
    copy.length = std::min(d.payload.size(), copy.bytes.size());
    std::memcpy(copy.bytes.data(), d.payload.data(), copy.length);
  }
  const uint64_t one = 1;
  (void)!::write(in.fd, &one, sizeof(one));
}

void PsGroup::TakeHandedOff(int thread, std::vector<Datagram>* out) {
  Inbox& in = inbox_[static_cast<size_t>(thread)];
  uint64_t count = 0;
  (void)!::read(in.fd, &count, sizeof(count));
  out->clear();
  absl::MutexLock lock(&mu_);
  std::swap(*out, in.datagrams);
}

void PsGroup::Report(const IterationStats& s, int64_t first_us, int64_t done_us) {
  absl::MutexLock lock(&mu_);
  Merge& m = merge_[static_cast<size_t>(s.iteration)];
  if (first_us >= 0) m.first_us = m.first_us < 0 ? first_us : std::min(m.first_us, first_us);
  m.done_us = std::max(m.done_us, done_us);
  m.stats.iteration = s.iteration;
  m.stats.size_bytes = s.size_bytes;
  m.stats.retransmissions += s.retransmissions;
  m.stats.contributions += s.contributions;
  m.stats.in_network += s.in_network;
  ++m.reported;
  while (next_ < static_cast<int64_t>(merge_.size()) &&
         merge_[static_cast<size_t>(next_)].reported == threads()) {
    Merge& done = merge_[static_cast<size_t>(next_)];
    done.stats.time_ms =
        done.first_us < 0 ? 0 : static_cast<double>(done.done_us - done.first_us) / 1000.0;
    iterations_.push_back(done.stats);
    if (options_.on_iteration) options_.on_iteration(done.stats);
    ++next_;
  }
}

std::vector<IterationStats> PsGroup::iterations() {
  absl::MutexLock lock(&mu_);
  return iterations_;
}

void Ps::SteerToOwners() {
  std::vector<sock_filter> program;
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0));  // A = tag
  // The newest values first; at most 500 of them (a cBPF program holds 4096 instructions).
  for (size_t n = 0, i = views_.size(); i-- > 0 && n < 500;) {
    const TagView& v = views_[i];
    if (v.span.chunks == 0) continue;
    ++n;
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v.tag->tag, 0, 6));
    program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4));  // A = chunk
    program.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, static_cast<uint32_t>(v.span.chunks)));
    program.push_back(
        BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, static_cast<uint32_t>(v.span.first_chunk)));
    program.push_back(BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, kSteeringBlock));
    program.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, static_cast<uint32_t>(threads_)));
    program.push_back(BPF_STMT(BPF_RET | BPF_A, 0));
  }
  program.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
  report_.steered = socket_->AttachReusePortProgram(program).ok();
}

namespace {

void AddCounters(const PsCounters& a, PsCounters* sum) {
  sum->received += a.received;
  sum->raw += a.raw;
  sum->aggregate += a.aggregate;
  sum->fallback += a.fallback;
  sum->retransmit += a.retransmit;
  sum->duplicate += a.duplicate;
  sum->violation += a.violation;
  sum->replan_overlap += a.replan_overlap;
  sum->count_mismatch += a.count_mismatch;
  sum->unknown_source += a.unknown_source;
  sum->unknown_tag += a.unknown_tag;
  sum->out_of_range += a.out_of_range;
  sum->malformed += a.malformed;
  sum->ignored += a.ignored;
  sum->results_sent += a.results_sent;
  sum->results_resent += a.results_resent;
  sum->results_forgotten += a.results_forgotten;
  sum->acks_sent += a.acks_sent;
  sum->contributions += a.contributions;
  sum->in_network += a.in_network;
  sum->send_errors += a.send_errors;
  sum->dropped_by_hook += a.dropped_by_hook;
  sum->handed_off += a.handed_off;
}

}  // namespace

absl::StatusOr<PsReport> RunThreads(const JobConfig& config, const PsOptions& options,
                                    int threads) {
  PsGroup group(threads, options);
  std::vector<std::unique_ptr<Ps>> parts;
  for (int t = 0; t < threads; ++t) {
    parts.push_back(std::make_unique<Ps>(config, options));
    parts.back()->SetThread(t, &group);
    if (absl::Status s = parts.back()->Prepare(); !s.ok()) return s;
  }
  std::vector<absl::Status> status(static_cast<size_t>(threads));
  std::vector<int64_t> cpu_us(static_cast<size_t>(threads), 0);
  absl::Status s = RunDataPlane(options.netns_fd, [&]() -> absl::Status {
    SocketOptions so = options.socket;
    so.reuse_port = true;
    so.buffer_bytes = parts[0]->BufferBytes();
    std::vector<std::unique_ptr<UdpSocket>> sockets;
    for (int t = 0; t < threads; ++t) {
      auto socket = UdpSocket::Open(so);
      if (!socket.ok()) return socket.status();
      sockets.push_back(std::move(*socket));
    }
    // Sockets are bound to the namespace they were made in; the threads may run anywhere.
    std::vector<std::thread> running;
    for (int t = 1; t < threads; ++t) {
      running.emplace_back([&, t] {
        const int64_t start = ThreadCpuUs();
        status[t] = parts[t]->Run(std::move(sockets[t]));
        cpu_us[t] = ThreadCpuUs() - start;
      });
    }
    const int64_t start = ThreadCpuUs();
    status[0] = parts[0]->Run(std::move(sockets[0]));
    cpu_us[0] = ThreadCpuUs() - start;
    for (std::thread& r : running) r.join();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  PsReport report = parts[0]->report();
  report.counters = {};
  report.violations.clear();
  report.threads = threads;
  for (int t = 0; t < threads; ++t) {
    const PsReport& r = parts[t]->report();
    AddCounters(r.counters, &report.counters);
    for (const std::string& v : r.violations) {
      if (report.violations.size() < kMaxLoggedViolations) report.violations.push_back(v);
    }
    report.iterations_done = std::min(report.iterations_done, r.iterations_done);
    report.complete = report.complete && r.complete;
    report.cpu_us += cpu_us[t];
  }
  report.iterations = group.iterations();
  return report;
}

}  // namespace inac::agent
