#include "sinks/null_sink.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;

std::vector<Message> batch(std::size_t n) {
  std::vector<Message> out(n);
  for (auto& m : out) {
    m.id = "id";
    m.aggregatetype = "order";
    m.aggregateid = "1";
    m.type = "T";
    m.payload = "{}";
  }
  return out;
}

TEST(NullSink, AcksEverything) {
  auto sink = create_null_sink({});
  EXPECT_EQ(sink->describe(), "null");
  EXPECT_TRUE(sink->usable());
  std::vector<Outcome> outcomes(1000);
  sink->send(batch(1000), outcomes, 0ms);
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.delivery, Delivery::kAcked);
    EXPECT_EQ(o.error, "");
  }
  std::vector<Outcome> none;
  sink->send({}, none, 1s);
  EXPECT_TRUE(none.empty());
}

TEST(NullSink, FailEveryCountsAcrossBatches) {
  auto sink = create_null_sink({{"fail_every", "3"}});
  EXPECT_EQ(sink->describe(), "null fail_every=3");
  std::vector<Outcome> outcomes(4);
  sink->send(batch(4), outcomes, 1s);  // messages 1..4: the 3rd fails
  EXPECT_EQ(outcomes[0].delivery, Delivery::kAcked);
  EXPECT_EQ(outcomes[1].delivery, Delivery::kAcked);
  EXPECT_EQ(outcomes[2].delivery, Delivery::kRejected);
  EXPECT_NE(outcomes[2].error.find("fail_every=3"), std::string::npos);
  EXPECT_EQ(outcomes[3].delivery, Delivery::kAcked);
  outcomes.assign(3, Outcome{});
  sink->send(batch(3), outcomes, 1s);  // messages 5..7: the 6th fails
  EXPECT_EQ(outcomes[0].delivery, Delivery::kAcked);
  EXPECT_EQ(outcomes[1].delivery, Delivery::kRejected);
  EXPECT_EQ(outcomes[2].delivery, Delivery::kAcked);
  EXPECT_EQ(outcomes[2].error, "");

  auto every = create_null_sink({{"fail_every", "1"}});
  outcomes.assign(2, Outcome{});
  every->send(batch(2), outcomes, 1s);
  EXPECT_EQ(outcomes[0].delivery, Delivery::kRejected);
  EXPECT_EQ(outcomes[1].delivery, Delivery::kRejected);
}

TEST(NullSink, DeclaresItsOptions) {
  ASSERT_EQ(kNullOptionCount, 3u);
  EXPECT_STREQ(kNullOptions[0].name, "fail_every");
  EXPECT_EQ(kNullOptions[0].kind, OptionKind::kInteger);
  EXPECT_STREQ(kNullOptions[1].name, "throw_every");
  EXPECT_EQ(kNullOptions[1].kind, OptionKind::kInteger);
  EXPECT_STREQ(kNullOptions[2].name, "delay_ms");
  EXPECT_EQ(kNullOptions[2].kind, OptionKind::kInteger);
  EXPECT_EQ(create_null_sink({})->max_message_bytes(), 0u);  // no limit
}

TEST(NullSink, BadOptions) {
  for (const char* bad : {"0", "-1", "", "x", "3x", " 3", "1000000000000000000000"}) {
    EXPECT_THROW(create_null_sink({{"fail_every", bad}}), ConfigError) << bad;
  }
  for (const char* bad : {"-1", "", "x", "1001", "5ms"}) {
    EXPECT_THROW(create_null_sink({{"delay_ms", bad}}), ConfigError) << bad;
  }
  try {
    create_null_sink({{"bootstrap.servers", "x"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "sink \"null\" has no option \"bootstrap.servers\"");
  }
}

}  // namespace

namespace {

TEST(NullSink, ThrowEveryThrowsFromSend) {
  auto sink = outbox::sinks::create_null_sink({{"throw_every", "2"}});
  EXPECT_EQ(sink->describe(), "null throw_every=2");
  std::vector<outbox::sinks::Outcome> outcomes(3);
  EXPECT_NO_THROW(sink->send(batch(3), outcomes, std::chrono::milliseconds(0)));
  EXPECT_THROW(sink->send(batch(3), outcomes, std::chrono::milliseconds(0)), std::runtime_error);
  EXPECT_NO_THROW(sink->send(batch(3), outcomes, std::chrono::milliseconds(0)));
  EXPECT_THROW(outbox::sinks::create_null_sink({{"throw_every", "0"}}), outbox::sinks::ConfigError);
}

}  // namespace

namespace {

// delay_ms: each send() takes at least that long, and still acknowledges every message.
TEST(NullSink, DelayMsSlowsEverySend) {
  using namespace std::chrono;
  auto sink = outbox::sinks::create_null_sink({{"delay_ms", "20"}});
  EXPECT_EQ(sink->describe(), "null delay_ms=20");
  std::vector<outbox::sinks::Outcome> outcomes(4);
  const auto start = steady_clock::now();
  sink->send(batch(4), outcomes, 1s);
  sink->send(batch(4), outcomes, 1s);
  EXPECT_GE(steady_clock::now() - start, 40ms);
  for (const auto& outcome : outcomes) EXPECT_EQ(outcome.delivery, outbox::sinks::Delivery::kAcked);
  EXPECT_EQ(outbox::sinks::create_null_sink({{"delay_ms", "0"}})->describe(), "null");
}

}  // namespace
