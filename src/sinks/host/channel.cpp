#include "sinks/host/channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace outbox::sinks {

Channel::Channel(int fd) : fd_(fd) {
  const int flags = fcntl(fd_, F_GETFL);
  if (flags >= 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

Channel::~Channel() { close(); }

void Channel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Channel::wait(short events, Clock::time_point deadline) {
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, left > 1000000 ? 1000000 : static_cast<int>(left));
    if (n > 0) return true;  // ready, or an error / hang-up the next call reports
    if (n < 0 && errno != EINTR) return true;
  }
}

Channel::Result Channel::send(const std::string& frame, Clock::time_point deadline) {
  if (fd_ < 0) return Result::kClosed;
  std::size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait(POLLOUT, deadline)) return Result::kTimeout;
    } else {
      return Result::kClosed;
    }
  }
  return Result::kFrame;
}

Channel::Result Channel::receive(wire::Type& type, std::string& body, Clock::time_point deadline) {
  if (fd_ < 0) return Result::kClosed;
  for (;;) {
    char* target;
    std::size_t wanted;
    if (!in_body_) {
      target = header_ + header_read_;
      wanted = sizeof(header_) - header_read_;
    } else {
      target = body_.data() + body_read_;
      wanted = body_.size() - body_read_;
    }
    if (wanted > 0) {
      const ssize_t n = ::read(fd_, target, wanted);
      if (n == 0) return Result::kClosed;
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return Result::kClosed;
        if (!wait(POLLIN, deadline)) return Result::kTimeout;
        continue;
      }
      (in_body_ ? body_read_ : header_read_) += static_cast<std::size_t>(n);
      continue;
    }
    if (!in_body_) {
      // The body is read straight into its own buffer: one copy, out of the socket.
      body_.resize(wire::body_length(header_));
      body_read_ = 0;
      in_body_ = true;
      continue;
    }
    type = static_cast<wire::Type>(static_cast<std::uint8_t>(header_[4]));
    body.swap(body_);
    body_.clear();
    header_read_ = 0;
    body_read_ = 0;
    in_body_ = false;
    return Result::kFrame;
  }
}

}  // namespace outbox::sinks
