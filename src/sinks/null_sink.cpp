#include "sinks/null_sink.hpp"

#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

#include "sinks/option_rules.hpp"

namespace outbox::sinks {

const OptionSpec kNullOptions[] = {
    {"fail_every", OptionKind::kInteger,
     "N >= 1: reject every Nth message (counted across batches), to exercise dead letters"},
    {"throw_every", OptionKind::kInteger, "N >= 1: every Nth send() throws, as a buggy sink would"},
    {"delay_ms", OptionKind::kInteger,
     "0 to 1000: each send() takes this long, as a sink waiting for its broker would"},
};
const std::size_t kNullOptionCount = std::size(kNullOptions);

namespace {

class NullSink final : public Sink {
 public:
  NullSink(std::uint64_t fail_every, std::uint64_t throw_every, std::uint64_t delay_ms)
      : fail_every_(fail_every), throw_every_(throw_every), delay_(delay_ms) {}

  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds /*timeout*/) override {
    ++sends_;
    // A slow sink, for benchmarks where the sink is the bottleneck (capped at 1 s, so that a
    // shutdown waits at most that long).
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (throw_every_ != 0 && sends_ % throw_every_ == 0) {
      throw std::runtime_error("the null sink threw (throw_every=" + std::to_string(throw_every_) +
                               ")");
    }
    outcomes.resize(messages.size());
    for (Outcome& outcome : outcomes) {
      ++seen_;
      if (fail_every_ != 0 && seen_ % fail_every_ == 0) {
        outcome.delivery = Delivery::kRejected;
        outcome.error =
            "rejected by the null sink (fail_every=" + std::to_string(fail_every_) + ")";
      } else {
        outcome.delivery = Delivery::kAcked;
        outcome.error.clear();
      }
    }
  }

  std::string describe() const override {
    std::string out = "null";
    if (fail_every_ != 0) out += " fail_every=" + std::to_string(fail_every_);
    if (throw_every_ != 0) out += " throw_every=" + std::to_string(throw_every_);
    if (delay_.count() != 0) out += " delay_ms=" + std::to_string(delay_.count());
    return out;
  }

 private:
  std::uint64_t fail_every_;
  std::uint64_t throw_every_;
  std::chrono::milliseconds delay_;
  std::uint64_t seen_ = 0;
  std::uint64_t sends_ = 0;
};

// A whole number in [min, max].
std::uint64_t parse_whole(const std::string& name, const std::string& value, std::uint64_t min,
                          std::uint64_t max, const std::string& range) {
  const std::string error =
      "null sink: " + name + " must be a whole number " + range + ", not \"" + value + "\"";
  if (value.empty() || value.size() > 18) throw ConfigError(error);
  std::uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') throw ConfigError(error);
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n < min || n > max) throw ConfigError(error);
  return n;
}

std::uint64_t parse_every(const std::string& name, const std::string& value) {
  return parse_whole(name, value, 1, UINT64_MAX, ">= 1");
}

}  // namespace

std::unique_ptr<Sink> create_null_sink(const Options& options) {
  check_declared("null", OptionTable{kNullOptions, kNullOptionCount}, options);
  std::uint64_t fail_every = 0;
  std::uint64_t throw_every = 0;
  std::uint64_t delay_ms = 0;
  for (const auto& [name, value] : options) {
    if (name == "fail_every") {
      fail_every = parse_every(name, value);
    } else if (name == "throw_every") {
      throw_every = parse_every(name, value);
    } else {  // declared: delay_ms
      delay_ms = parse_whole(name, value, 0, 1000, "from 0 to 1000");
    }
  }
  return std::make_unique<NullSink>(fail_every, throw_every, delay_ms);
}

}  // namespace outbox::sinks
