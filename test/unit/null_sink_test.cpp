// The null sink: acknowledgements, fail_every, unavailable_every, throw_every, delay_ms, and
// its options.
// Per-key order: null_sink_order_test.cpp; record_file: null_sink_record_test.cpp.
#include "sinks/null/null_sink.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "null_test_support.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;

// n messages of one key.
Batch same_key(std::size_t n) {
  Batch b;
  for (std::size_t i = 0; i < n; ++i) b.add("1");
  return b;
}

TEST(NullSink, AcksEverything) {
  auto sink = create_null_sink({});
  EXPECT_EQ(sink->describe(), "null");
  EXPECT_TRUE(sink->usable());
  const Batch b = same_key(1000);
  std::vector<Outcome> outcomes(1000);
  sink->send(b.messages(), outcomes, 0ms);
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
  // Distinct keys: no rejection defers another message.
  auto outcomes = send(*sink, Batch{"1", "2", "3", "4"});  // messages 1..4: the 3rd fails
  EXPECT_EQ(summary(outcomes), "AARA");
  EXPECT_NE(outcomes[2].error.find("fail_every=3"), std::string::npos);
  outcomes = send(*sink, Batch{"5", "6", "7"});  // messages 5..7: the 6th fails
  EXPECT_EQ(summary(outcomes), "ARA");
  EXPECT_EQ(outcomes[2].error, "");

  auto every = create_null_sink({{"fail_every", "1"}});
  EXPECT_EQ(summary(send(*every, Batch{"1", "2"})), "RR");
}

// A rejected message defers the later ones of its key, which fail_every does not count.
TEST(NullSink, FailEverySkipsDeferredMessages) {
  auto sink = create_null_sink({{"fail_every", "2"}});
  auto outcomes = send(*sink, Batch{"1", "1", "1", "2", "3", "1"});
  // 1st offered: A; 2nd: R; then "1" is deferred; "2" is the 3rd (A), "3" the 4th (R).
  EXPECT_EQ(summary(outcomes), "ARDARD");
  EXPECT_EQ(outcomes[2].error, "not sent: an earlier event of its key failed");
  EXPECT_EQ(summary(send(*sink, same_key(3))), "ARD");  // 5th A, 6th R

  auto every = create_null_sink({{"fail_every", "1"}});
  EXPECT_EQ(summary(send(*every, same_key(3))), "RDD");
}

// Every Nth message offered is a transient failure, with the exact error; deferred messages
// are not counted, and the later messages of its key in the batch are deferred.
TEST(NullSink, UnavailableEveryCountsOfferedMessages) {
  auto sink = create_null_sink({{"unavailable_every", "3"}});
  EXPECT_EQ(sink->describe(), "null unavailable_every=3");
  auto outcomes = send(*sink, Batch{"1", "2", "3", "4"});  // messages 1..4: the 3rd
  EXPECT_EQ(summary(outcomes), "AAUA");
  EXPECT_EQ(outcomes[2].error, "unavailable: the null sink's unavailable_every=3");
  EXPECT_EQ(outcomes[3].error, "");
  // 5th A, 6th U, then its key's later messages deferred (not counted), 7th A, 8th A, 9th U.
  outcomes = send(*sink, Batch{"1", "2", "2", "2", "3", "4", "5"});
  EXPECT_EQ(summary(outcomes), "AUDDAAU");
  EXPECT_EQ(outcomes[1].error, "unavailable: the null sink's unavailable_every=3");
  EXPECT_EQ(outcomes[2].error, "not sent: an earlier event of its key failed");
  EXPECT_EQ(outcomes[3].error, "not sent: an earlier event of its key failed");
  EXPECT_EQ(outcomes[6].error, "unavailable: the null sink's unavailable_every=3");

  auto every = create_null_sink({{"unavailable_every", "1"}});
  EXPECT_EQ(summary(send(*every, Batch{"1", "1", "2"})), "UDU");
  for (const char* bad : {"0", "-1", "", "x"}) {
    EXPECT_THROW(create_null_sink({{"unavailable_every", bad}}), ConfigError) << bad;
  }
}

// With fail_every, one count: a message that both would hit is rejected.
TEST(NullSink, UnavailableEveryWithFailEvery) {
  auto sink = create_null_sink({{"fail_every", "3"}, {"unavailable_every", "2"}});
  EXPECT_EQ(sink->describe(), "null fail_every=3 unavailable_every=2");
  const auto outcomes = send(*sink, Batch{"1", "2", "3", "4", "5", "6", "7"});
  EXPECT_EQ(summary(outcomes), "AURUARA");
  EXPECT_EQ(outcomes[2].error, "rejected by the null sink (fail_every=3)");
  EXPECT_EQ(outcomes[5].error, "rejected by the null sink (fail_every=3)");
  EXPECT_EQ(outcomes[3].error, "unavailable: the null sink's unavailable_every=2");
}

TEST(NullSink, DeclaresItsOptions) {
  ASSERT_EQ(kNullOptionCount, 7u);
  const std::pair<const char*, OptionKind> want[] = {
      {"fail_every", OptionKind::kInteger},      {"unavailable_every", OptionKind::kInteger},
      {"throw_every", OptionKind::kInteger},     {"delay_ms", OptionKind::kInteger},
      {"reject_aggregateid", OptionKind::kText}, {"reject_times", OptionKind::kInteger},
      {"record_file", OptionKind::kFile}};
  for (std::size_t i = 0; i < kNullOptionCount; ++i) {
    EXPECT_STREQ(kNullOptions[i].name, want[i].first);
    EXPECT_EQ(kNullOptions[i].kind, want[i].second) << want[i].first;
  }
  EXPECT_EQ(create_null_sink({})->max_message_bytes(), 0u);  // no limit
}

std::string config_error(const Options& options) {
  try {
    create_null_sink(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

TEST(NullSink, BadOptions) {
  for (const char* bad : {"0", "-1", "", "x", "3x", " 3", "1000000000000000000000"}) {
    EXPECT_THROW(create_null_sink({{"fail_every", bad}}), ConfigError) << bad;
  }
  for (const char* bad : {"-1", "", "x", "1001", "5ms"}) {
    EXPECT_THROW(create_null_sink({{"delay_ms", bad}}), ConfigError) << bad;
  }
  EXPECT_EQ(config_error({{"bootstrap.servers", "x"}}),
            "sink \"null\" has no option \"bootstrap.servers\"");

  EXPECT_EQ(config_error({{"reject_times", "2"}}),
            "null sink: reject_times needs reject_aggregateid");
  for (const char* bad : {"0", "1001", "-1", "x", ""}) {
    EXPECT_THROW(create_null_sink({{"reject_aggregateid", "k"}, {"reject_times", bad}}),
                 ConfigError)
        << bad;
  }
  EXPECT_EQ(config_error({{"reject_aggregateid", "k"}, {"reject_times", "1001"}}),
            "null sink: reject_times must be a whole number from 1 to 1000, not \"1001\"");
  EXPECT_EQ(config_error({{"reject_aggregateid", ""}}),
            "null sink: reject_aggregateid must not be empty");
  EXPECT_EQ(config_error({{"reject_aggregateid", "k"}, {"reject_times", "1000"}}), "none");
  EXPECT_EQ(config_error({{"reject_times", "1"}, {"reject_aggregateid", "k"}}), "none");
}

TEST(NullSink, ThrowEveryThrowsFromSendAndStart) {
  auto sink = create_null_sink({{"throw_every", "2"}});
  EXPECT_EQ(sink->describe(), "null throw_every=2");
  const Batch b = same_key(3);
  std::vector<Outcome> outcomes(3);
  EXPECT_NO_THROW(sink->send(b.messages(), outcomes, 0ms));
  EXPECT_THROW(sink->send(b.messages(), outcomes, 0ms), std::runtime_error);
  EXPECT_NO_THROW(sink->start(b.messages(), outcomes, 0ms));
  EXPECT_THROW(sink->start(b.messages(), outcomes, 0ms), std::runtime_error);
  EXPECT_NO_THROW(sink->finish());
  EXPECT_THROW(create_null_sink({{"throw_every", "0"}}), ConfigError);
}

// delay_ms: each batch takes at least that long, and still acknowledges every message.
TEST(NullSink, DelayMsSlowsEverySend) {
  using namespace std::chrono;
  auto sink = create_null_sink({{"delay_ms", "20"}});
  EXPECT_EQ(sink->describe(), "null delay_ms=20");
  const Batch b = same_key(4);
  std::vector<Outcome> outcomes(4);
  const auto start = steady_clock::now();
  sink->send(b.messages(), outcomes, 1s);
  sink->send(b.messages(), outcomes, 1s);
  EXPECT_GE(steady_clock::now() - start, 40ms);
  EXPECT_EQ(summary(outcomes), "AAAA");
  EXPECT_EQ(create_null_sink({{"delay_ms", "0"}})->describe(), "null");
}

}  // namespace
