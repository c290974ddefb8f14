#include "sinks/null_sink.hpp"

#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>

#include "sinks/option_rules.hpp"

namespace outbox::sinks {

const OptionSpec kNullOptions[] = {
    {"fail_every", OptionKind::kInteger,
     "N >= 1: reject every Nth message (counted across batches), to exercise dead letters"},
    {"throw_every", OptionKind::kInteger, "N >= 1: every Nth send() throws, as a buggy sink would"},
};
const std::size_t kNullOptionCount = std::size(kNullOptions);

namespace {

class NullSink final : public Sink {
 public:
  NullSink(std::uint64_t fail_every, std::uint64_t throw_every)
      : fail_every_(fail_every), throw_every_(throw_every) {}

  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds /*timeout*/) override {
    ++sends_;
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
    return out;
  }

 private:
  std::uint64_t fail_every_;
  std::uint64_t throw_every_;
  std::uint64_t seen_ = 0;
  std::uint64_t sends_ = 0;
};

std::uint64_t parse_every(const std::string& name, const std::string& value) {
  const std::string error =
      "null sink: " + name + " must be a whole number >= 1, not \"" + value + "\"";
  if (value.empty() || value.size() > 18) throw ConfigError(error);
  std::uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') throw ConfigError(error);
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n == 0) throw ConfigError(error);
  return n;
}

}  // namespace

std::unique_ptr<Sink> create_null_sink(const Options& options) {
  check_declared("null", OptionTable{kNullOptions, kNullOptionCount}, options);
  std::uint64_t fail_every = 0;
  std::uint64_t throw_every = 0;
  for (const auto& [name, value] : options) {
    if (name == "fail_every") {
      fail_every = parse_every(name, value);
    } else {  // declared: throw_every
      throw_every = parse_every(name, value);
    }
  }
  return std::make_unique<NullSink>(fail_every, throw_every);
}

}  // namespace outbox::sinks
