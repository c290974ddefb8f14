// One end of the socketpair between the relay and the sink host: whole frames (sinks/host/wire.hpp)
// in and out, each wait bounded by a deadline, so a hung peer never blocks the caller past it.
// The socket is non-blocking; a frame half read when a deadline passes is kept for the next
// call. Writes use MSG_NOSIGNAL: a dead peer is an error, not a SIGPIPE.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "sinks/host/wire.hpp"

namespace outbox::sinks {

class Channel {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Result { kFrame, kTimeout, kClosed };

  // Takes ownership of `fd` and makes it non-blocking.
  explicit Channel(int fd);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  void close();

  // Sends a whole frame (wire::Writer::frame). kClosed when the peer is gone, kTimeout when it
  // did not take the frame by `deadline` (the frame may then be half sent: the channel is no
  // longer usable).
  Result send(const std::string& frame, Clock::time_point deadline);

  // Receives one frame into type/body. kClosed at end of file or on a read error; kTimeout
  // when none is complete by `deadline`. Throws wire::WireError for a malformed header.
  Result receive(wire::Type& type, std::string& body, Clock::time_point deadline);

 private:
  // Waits until fd_ is ready for `events` or the deadline passes; false on timeout.
  bool wait(short events, Clock::time_point deadline);

  int fd_ = -1;
  char header_[wire::kHeaderBytes] = {};
  std::size_t header_read_ = 0;
  std::string body_;
  std::size_t body_read_ = 0;
  bool in_body_ = false;
};

}  // namespace outbox::sinks
