// The log lines a sink keeps for take_log() (its client library's lines, its connection
// events): at most a fixed number between two takes, the rest counted and reported as one
// line, so that a chatty library cannot grow the relay's memory between two log flushes.
// Thread-safe: its own mutex, since client libraries log from their own threads and from
// inside calls made with the sink's lock held.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class LogBuffer {
 public:
  static constexpr std::size_t kDefaultMaxLines = 100;

  // `source` starts the line that counts the dropped ones ("librdkafka", "nats").
  explicit LogBuffer(std::string source, std::size_t max_lines = kDefaultMaxLines)
      : source_(std::move(source)), max_lines_(max_lines) {}
  LogBuffer(const LogBuffer&) = delete;
  LogBuffer& operator=(const LogBuffer&) = delete;

  // Keeps the line, or counts it as dropped once max_lines are kept. Out of memory: the line
  // is lost.
  void add(int level, std::string text) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mu_);
      if (lines_.size() >= max_lines_) {
        ++dropped_;
        return;
      }
      lines_.push_back(LogLine{level, std::move(text)});
    } catch (...) {
    }
  }

  // The lines kept since the last take, then (at level 4) how many were dropped, if any.
  std::vector<LogLine> take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<LogLine> out;
    out.swap(lines_);
    if (dropped_ > 0) {
      out.push_back(
          LogLine{4, source_ + ": " + std::to_string(dropped_) + " more log lines were dropped"});
      dropped_ = 0;
    }
    return out;
  }

 private:
  const std::string source_;
  const std::size_t max_lines_;
  std::mutex mu_;
  std::vector<LogLine> lines_;
  std::size_t dropped_ = 0;
};

}  // namespace outbox::sinks
