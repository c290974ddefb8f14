// A sink that runs in a child process, outbox_sink_host: a crash of the sink's library (a
// SIGSEGV in librdkafka, an abort in a third-party plugin) ends that process, not the relay, so
// PostgreSQL does not restart. Plain C++, no PostgreSQL: unit-tested with plugins that crash
// and hang (test/unit/process_sink_test.cpp).
//
// The relay's calls become requests over a socketpair (sinks/host/wire.hpp), answered in order by
// the host, which makes the same calls on the real sink: pipelining holds (two batches started,
// finish() for the oldest). While finish() waits, the observer is called at least every 100 ms
// with the client error the host forwards; when it says stop, the host's sink is told to stop.
//
// When the host dies, or does not answer by a batch's start + timeout + grace, it is killed and
// reaped; every started batch's messages become kUnavailable ("sink process died (signal 11)",
// "sink process did not answer; killed"), no attempt counted, and usable() turns false: the
// relay creates a new sink, and with it a new process, after its back-off.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "sinks/host/channel.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

struct ProcessSinkConfig {
  std::string program;  // the host executable, outbox_sink_host
  std::string library;  // the sink's library, outbox_sink_<name>.so
  std::string name;
  Options resolved;  // files and secrets already resolved; sent over the socket, never in argv
  // How long past a batch's deadline the host may take to answer before it is killed.
  std::chrono::milliseconds grace{5000};
  // How long the host may take to start and create the sink.
  std::chrono::milliseconds create_timeout{30000};
};

class ProcessSink final : public Sink {
 public:
  // Starts the host and creates the sink there. Throws ConfigError when the sink refuses its
  // options, std::runtime_error for any other failure (the process is then reaped).
  static std::unique_ptr<ProcessSink> spawn(const ProcessSinkConfig& config);

  ~ProcessSink() override;
  ProcessSink(const ProcessSink&) = delete;
  ProcessSink& operator=(const ProcessSink&) = delete;

  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds timeout) override;
  void finish() override;
  bool usable() const override { return ended_.empty() && usable_; }
  std::string describe() const override { return description_; }
  std::vector<LogLine> take_log() override;
  std::size_t max_message_bytes() const override { return max_message_bytes_; }

  // The host's pid (still valid after it was reaped, for tests); why it ended, "" while alive.
  pid_t pid() const { return pid_; }
  const std::string& ended() const { return ended_; }

 private:
  using Clock = Channel::Clock;
  struct Started {
    std::vector<Outcome>* outcomes;
    std::size_t count;
    Clock::time_point deadline;  // start + timeout + grace
  };

  ProcessSink(int socket, pid_t pid, std::chrono::milliseconds grace);

  // Sends a request and waits for its reply of type `expected`; returns its body, the reply's
  // head already read into `reply`. While `observing`, forwards client errors to the observer
  // and stop to the host. Throws std::runtime_error after ending the process when it fails.
  wire::Reader call(const std::string& frame, wire::Type expected, Clock::time_point deadline,
                    bool observing, wire::Reply& reply);
  // After the host was reaped: fails every started batch with `why`, then throws it.
  [[noreturn]] void fail(const std::string& why);
  void throw_if_failed(const wire::Reply& reply);

  Channel channel_;
  pid_t pid_;
  std::chrono::milliseconds grace_;
  std::string description_;
  std::size_t max_message_bytes_ = 0;
  bool usable_ = true;
  std::string ended_;
  bool ended_logged_ = false;
  std::string client_error_;  // the latest the host forwarded, kept across requests as it does
  std::deque<Started> started_;
  std::string body_;  // the last reply's body, which call()'s Reader points into
  wire::Writer writer_;
};

}  // namespace outbox::sinks
