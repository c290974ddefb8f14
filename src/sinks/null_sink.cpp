#include "sinks/null_sink.hpp"

#include <cstdint>
#include <string>

namespace outbox::sinks {

namespace {

class NullSink final : public Sink {
 public:
  explicit NullSink(std::uint64_t fail_every) : fail_every_(fail_every) {}

  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds /*timeout*/) override {
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
    return fail_every_ == 0 ? "null" : "null fail_every=" + std::to_string(fail_every_);
  }

 private:
  std::uint64_t fail_every_;
  std::uint64_t seen_ = 0;
};

std::uint64_t parse_fail_every(const std::string& value) {
  const std::string error =
      "null sink: fail_every must be a whole number >= 1, not \"" + value + "\"";
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
  std::uint64_t fail_every = 0;
  for (const auto& [name, value] : options) {
    if (name == "fail_every") {
      fail_every = parse_fail_every(value);
    } else {
      throw ConfigError("null sink: unknown option \"" + name + "\" (known: fail_every)");
    }
  }
  return std::make_unique<NullSink>(fail_every);
}

}  // namespace outbox::sinks
