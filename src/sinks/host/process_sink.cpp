#include "sinks/host/process_sink.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "sinks/host/sink_process.hpp"

namespace outbox::sinks {
namespace {

using namespace std::chrono_literals;

// The observer's period while a request waits (Sink::observe_waits: at least every 100 ms).
constexpr auto kObservePeriod = 100ms;
// How long a host whose socket closed may take to finish dying (a core dump, say) before it is
// killed: its own end ("signal 11") is then what the relay reports.
constexpr auto kDyingPatience = 2000ms;
constexpr int kSocketBufferBytes = 4 << 20;

}  // namespace

std::unique_ptr<ProcessSink> ProcessSink::spawn(const ProcessSinkConfig& config) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::runtime_error(std::string("cannot start the sink process: socketpair: ") +
                             std::strerror(errno));
  }
  // Room for a whole batch or two in the socket: fewer wake-ups of each side per batch.
  for (int fd : fds) {
    const int bytes = kSocketBufferBytes;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
  pid_t pid;
  try {
    pid = spawn_sink_host(config.program, fds[1]);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  std::unique_ptr<ProcessSink> sink(new ProcessSink(fds[0], pid, config.grace));
  wire::Writer w;
  encode(w, wire::CreateRequest{config.library, config.name, config.resolved});
  wire::Reply reply;
  try {
    wire::Reader r = sink->call(w.frame(wire::Type::kCreate), wire::Type::kCreated,
                                Clock::now() + config.create_timeout, false, reply);
    sink->throw_if_failed(reply);
    wire::Created created = wire::decode_created(r);
    sink->description_ = std::move(created.description);
    sink->max_message_bytes_ = static_cast<std::size_t>(created.max_message_bytes);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    // 127: the exec failed (no such program, say).
    throw std::runtime_error("sink " + config.name + " could not be created in its process (" +
                             config.program + "): " + e.what());
  }
  return sink;
}

ProcessSink::ProcessSink(int socket, pid_t pid, std::chrono::milliseconds grace)
    : channel_(socket), pid_(pid), grace_(grace) {}

ProcessSink::~ProcessSink() {
  if (!ended_.empty()) return;  // reaped already
  // End of file tells the host to destroy its sink (which flushes for a second or two) and exit.
  channel_.close();
  reap_sink_host(pid_, grace_);
}

void ProcessSink::start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                        std::chrono::milliseconds timeout) {
  if (!ended_.empty()) throw std::runtime_error(ended_);
  wire::encode_batch(writer_, timeout, messages);
  const Clock::time_point deadline = Clock::now() + timeout + grace_;
  wire::Reply reply;
  call(writer_.frame(wire::Type::kStart), wire::Type::kStarted, deadline, true, reply);
  throw_if_failed(reply);
  started_.push_back({&outcomes, messages.size(), deadline});
}

void ProcessSink::finish() {
  if (started_.empty()) return;
  if (!ended_.empty()) {  // its outcomes were set when the process ended
    started_.pop_front();
    return;
  }
  Started oldest = started_.front();
  try {
    wire::Writer w;
    wire::Reply reply;
    wire::Reader r =
        call(w.frame(wire::Type::kFinish), wire::Type::kFinished, oldest.deadline, true, reply);
    throw_if_failed(reply);
    try {
      wire::decode_outcomes(r, *oldest.outcomes, oldest.count);
      r.end();
    } catch (const wire::WireError& e) {
      reap_sink_host(pid_, 0ms);
      fail(std::string("sink process sent a malformed reply (") + e.what() + "); killed");
    }
  } catch (...) {
    started_.pop_front();
    throw;
  }
  started_.pop_front();
}

std::vector<LogLine> ProcessSink::take_log() {
  if (ended_.empty()) {
    try {
      wire::Writer w;
      wire::Reply reply;
      wire::Reader r = call(w.frame(wire::Type::kTakeLog), wire::Type::kLog, Clock::now() + grace_,
                            false, reply);
      return wire::decode_log(r);
    } catch (const std::exception&) {
      if (ended_.empty()) throw;  // out of memory
    }
  }
  // Once, into the server log: why the relay's sink is gone.
  if (ended_logged_) return {};
  ended_logged_ = true;
  return {{3, ended_ + "; the relay creates the sink again"}};
}

wire::Reader ProcessSink::call(const std::string& frame, wire::Type expected,
                               Clock::time_point deadline, bool observing, wire::Reply& reply) {
  const Channel::Result sent = channel_.send(frame, deadline);
  if (sent == Channel::Result::kClosed)
    fail("sink process " + reap_sink_host(pid_, kDyingPatience));
  if (sent == Channel::Result::kTimeout) {
    reap_sink_host(pid_, 0ms);
    fail("sink process did not answer; killed");
  }
  bool stop_sent = false;
  Clock::time_point observed = Clock::now();
  for (;;) {
    const Clock::time_point until =
        observing ? std::min(deadline, observed + kObservePeriod) : deadline;
    wire::Type type{};
    Channel::Result got;
    try {
      got = channel_.receive(type, body_, until);
    } catch (const wire::WireError& e) {
      reap_sink_host(pid_, 0ms);
      fail(std::string("sink process sent a malformed frame (") + e.what() + "); killed");
    }
    if (got == Channel::Result::kClosed) {
      fail("sink process " + reap_sink_host(pid_, kDyingPatience));
    }
    bool new_error = false;
    if (got == Channel::Result::kTimeout) {
      if (Clock::now() >= deadline) {
        reap_sink_host(pid_, 0ms);
        fail("sink process did not answer; killed");
      }
    } else if (type == expected || (type == wire::Type::kClientError && observing)) {
      try {
        wire::Reader r(body_);
        if (type == expected) {
          reply = wire::decode_reply(r);
          usable_ = reply.usable;
          return r;
        }
        client_error_ = r.str();
        new_error = true;
      } catch (const wire::WireError& e) {
        reap_sink_host(pid_, 0ms);
        fail(std::string("sink process sent a malformed reply (") + e.what() + "); killed");
      }
    } else {
      reap_sink_host(pid_, 0ms);
      fail("sink process sent an unexpected frame (type " + std::to_string(static_cast<int>(type)) +
           "); killed");
    }
    if (observing && (new_error || Clock::now() - observed >= kObservePeriod)) {
      observed = Clock::now();
      if (!keep_waiting(client_error_) && !stop_sent) {
        stop_sent = true;
        wire::Writer w;
        // A full socket means a host that reads nothing: the deadline catches it.
        channel_.send(w.frame(wire::Type::kStopWaiting), Clock::now() + kObservePeriod);
      }
    }
  }
}

void ProcessSink::fail(const std::string& why) {
  channel_.close();
  ended_ = why;
  for (Started& batch : started_) {
    for (std::size_t i = 0; i < batch.count && i < batch.outcomes->size(); ++i) {
      (*batch.outcomes)[i] = {Delivery::kUnavailable, ended_};
    }
  }
  throw std::runtime_error(ended_);
}

void ProcessSink::throw_if_failed(const wire::Reply& reply) {
  if (reply.status == wire::Status::kConfigError) throw ConfigError(reply.error);
  if (reply.status == wire::Status::kFailed) throw std::runtime_error(reply.error);
}

}  // namespace outbox::sinks
