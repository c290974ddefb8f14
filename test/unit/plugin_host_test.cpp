// The relay's side of the C sink interface against plugins that break its rules: each is
// refused with a reason, or its breach becomes an outcome and a warning, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>
#include <thread>

#include "sinks/host/plugin_host.hpp"

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;

// A plain C plugin whose behaviour each test sets through this struct.
struct Behaviour {
  int create_status = OUTBOX_SINK_OK;
  int start_status = OUTBOX_SINK_OK;
  int32_t delivery = OUTBOX_DELIVERY_ACKED;
  bool leave_outcome = false;  // leaves the last message's outcome unset
  bool wait_from_other_thread = false;
  bool wait_in_create = false;
  bool unterminated_error = false;  // fills the error buffer without a NUL
  int destroyed = 0;
  int waits_seen = -1;
  std::string password;            // what create() was given, echoed everywhere by a careless sink
  std::deque<std::string> errors;  // the outcomes' texts, kept until the next batch
};
Behaviour behaviour;
const OutboxSinkHost* the_host = nullptr;

int test_create(const OutboxSinkOption* options, size_t count, const OutboxSinkHost* host,
                void** state, char* error, size_t error_size) {
  the_host = host;
  if (behaviour.wait_in_create) behaviour.waits_seen = host->keep_waiting(host->context, "");
  for (size_t i = 0; i < count; ++i) {
    if (std::strcmp(options[i].name, "password") == 0) behaviour.password = options[i].value;
  }
  if (behaviour.create_status != OUTBOX_SINK_OK) {
    std::snprintf(error, error_size, "no such thing: %s", "option x");
    return behaviour.create_status;
  }
  *state = &behaviour;
  return OUTBOX_SINK_OK;
}
void test_destroy(void* state) { ++static_cast<Behaviour*>(state)->destroyed; }
int test_start(void*, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes, size_t count,
               int64_t, char* error, size_t error_size) {
  if (behaviour.wait_from_other_thread) {
    std::thread t([] { behaviour.waits_seen = the_host->keep_waiting(the_host->context, ""); });
    t.join();
  }
  if (behaviour.start_status != OUTBOX_SINK_OK) {
    if (behaviour.unterminated_error) {
      std::memset(error, 'x', error_size);
    } else {
      std::snprintf(error, error_size, "broker said no\n(second line)%s",
                    behaviour.password.c_str());
    }
    return behaviour.start_status;
  }
  behaviour.errors.clear();
  for (size_t i = 0; i < count; ++i) {
    if (behaviour.leave_outcome && i + 1 == count) break;
    outcomes[i].delivery = behaviour.delivery;
    const std::string& text = behaviour.errors.emplace_back(
        std::string(messages[i].id.data, messages[i].id.len) + behaviour.password);
    outcomes[i].error = text.data();
    outcomes[i].error_len = text.size();
  }
  return OUTBOX_SINK_OK;
}
void test_describe(void*, char* buffer, size_t size) {
  std::snprintf(buffer, size, "test sink%s", behaviour.password.c_str());
}

const OutboxSinkOptionSpec kSpecs[] = {{"servers", OUTBOX_OPTION_TEXT, "where"},
                                       {"password", OUTBOX_OPTION_SECRET, "secret"}};

OutboxSinkCallbacks good_table() {
  OutboxSinkCallbacks t{};
  t.magic = OUTBOX_SINK_MAGIC;
  t.abi_version = OUTBOX_SINK_ABI_VERSION;
  t.size = sizeof(OutboxSinkCallbacks);
  t.message_size = sizeof(OutboxSinkMessage);
  t.outcome_size = sizeof(OutboxSinkOutcome);
  t.name = "test";
  t.options = kSpecs;
  t.option_count = 2;
  t.create = &test_create;
  t.destroy = &test_destroy;
  t.start = &test_start;
  t.describe = &test_describe;
  return t;
}

std::string refusal(const OutboxSinkCallbacks& table, const char* name = "test") {
  try {
    PluginHost host(&table, name);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

class PluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override { behaviour = Behaviour{}; }
};

TEST_F(PluginHostTest, RefusesBrokenTables) {
  OutboxSinkCallbacks t = good_table();
  EXPECT_EQ(refusal(t), "");
  t.magic = 0x12345678;
  EXPECT_NE(refusal(t).find("wrong magic"), std::string::npos);
  t = good_table();
  t.abi_version = 1;
  EXPECT_NE(refusal(t).find("built for sink interface version 1, this outbox has version 2"),
            std::string::npos);
  t = good_table();
  t.message_size = sizeof(OutboxSinkMessage) - 8;
  EXPECT_NE(refusal(t).find("gives message_size = " + std::to_string(t.message_size) +
                            ": set it to sizeof(OutboxSinkMessage)"),
            std::string::npos);
  t = good_table();
  t.outcome_size = 0;
  EXPECT_NE(refusal(t).find("gives outcome_size = 0: set it to sizeof(OutboxSinkOutcome)"),
            std::string::npos);
  t = good_table();
  t.outcome_size = sizeof(OutboxSinkOutcome) + 4;  // not a stride of 8-aligned structs
  EXPECT_NE(refusal(t).find("gives outcome_size"), std::string::npos);
  t = good_table();
  t.message_size = 1u << 20;
  EXPECT_NE(refusal(t).find("gives message_size"), std::string::npos);
  t = good_table();
  t.size = 16;
  EXPECT_NE(refusal(t).find("too small"), std::string::npos);
  t = good_table();
  EXPECT_NE(refusal(t, "other").find("names its sink \"test\", not \"other\""), std::string::npos);
  t = good_table();
  t.start = nullptr;
  EXPECT_NE(refusal(t).find("no start callback"), std::string::npos);
  t = good_table();
  const OutboxSinkOptionSpec bad_kind[] = {{"x", 9, ""}};
  t.options = bad_kind;
  t.option_count = 1;
  EXPECT_NE(refusal(t).find("unknown kind 9"), std::string::npos);
  const OutboxSinkOptionSpec repeated[] = {{"x", 0, ""}, {"x", 0, ""}};
  t.options = repeated;
  t.option_count = 2;
  EXPECT_NE(refusal(t).find("invalid or repeated name"), std::string::npos);
  const OutboxSinkOptionSpec bad_name[] = {{"Bad Name", 0, ""}};
  t.options = bad_name;
  t.option_count = 1;
  EXPECT_NE(refusal(t).find("invalid or repeated name"), std::string::npos);
  t.options = nullptr;
  EXPECT_NE(refusal(t).find("declares its options wrongly"), std::string::npos);
  EXPECT_NE(refusal(t).find("outbox_sink_test.so"), std::string::npos);
}

// A plugin built against a header from before the optional callbacks were added at the end:
// its size covers only the required ones, and whatever lies past it is never read.
TEST_F(PluginHostTest, OlderTableWithoutOptionalCallbacks) {
  struct Padded {
    OutboxSinkCallbacks table;
  } padded;
  padded.table = good_table();
  padded.table.size = offsetof(OutboxSinkCallbacks, finish);
  std::memset(reinterpret_cast<char*>(&padded.table) + padded.table.size, 0xff,
              sizeof(OutboxSinkCallbacks) - padded.table.size);  // garbage past its size
  PluginHost host(&padded.table, "test");
  auto sink = host.create({});
  EXPECT_TRUE(sink->usable());
  EXPECT_EQ(sink->max_message_bytes(), 0u);
  EXPECT_TRUE(sink->take_log().empty());
  Message m;
  m.id = "e1";
  std::vector<Outcome> out(1);
  sink->start({m}, out, 1s);
  sink->finish();
  EXPECT_EQ(out[0].delivery, Delivery::kAcked);
}

// A plugin built against a newer header, whose message and outcome have grown: the relay lays
// them out with the plugin's strides, the fields it does not know zeroed, and reads each
// outcome where the plugin wrote it. (A plugin built against an older, shorter layout goes
// through the same copy, of the shorter of the two sizes.)
struct GrownMessage {
  OutboxSinkMessage known;
  int64_t added_later[3];
};
struct GrownOutcome {
  OutboxSinkOutcome known;
  int64_t added_later[2];
};
int grown_start(void*, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes, size_t count,
                int64_t, char*, size_t) {
  const auto* in = reinterpret_cast<const GrownMessage*>(messages);
  auto* out = reinterpret_cast<GrownOutcome*>(outcomes);
  behaviour.errors.clear();
  for (size_t i = 0; i < count; ++i) {
    const GrownMessage& m = in[i];
    const bool zeroed = m.added_later[0] == 0 && m.added_later[1] == 0 && m.added_later[2] == 0 &&
                        out[i].added_later[0] == 0 && out[i].added_later[1] == 0;
    const std::string& text = behaviour.errors.emplace_back(
        std::string(m.known.id.data, m.known.id.len) + "/" +
        std::string(m.known.payload.data, m.known.payload.len) + "/" +
        std::to_string(m.known.created_at_unix_us) + (zeroed ? "" : "/not zeroed"));
    out[i].known.delivery = i % 2 == 0 ? OUTBOX_DELIVERY_REJECTED : OUTBOX_DELIVERY_ACKED;
    out[i].known.error = i % 2 == 0 ? text.data() : nullptr;
    out[i].known.error_len = i % 2 == 0 ? text.size() : 0;
    out[i].added_later[0] = -1;  // what the relay does not know, it does not read
  }
  return OUTBOX_SINK_OK;
}

TEST_F(PluginHostTest, StridesOfAGrownLayout) {
  OutboxSinkCallbacks t = good_table();
  t.message_size = sizeof(GrownMessage);
  t.outcome_size = sizeof(GrownOutcome);
  t.start = &grown_start;
  PluginHost host(&t, "test");
  auto sink = host.create({});
  std::vector<Message> messages(5);
  std::vector<std::string> texts;  // what the messages' views point at
  texts.reserve(2 * messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    messages[i].id = texts.emplace_back("e" + std::to_string(i));
    messages[i].payload = texts.emplace_back("{\"n\":" + std::to_string(i) + "}");
    messages[i].created_at_unix_us = 1000 + static_cast<int64_t>(i);
  }
  std::vector<Outcome> out(messages.size());
  sink->send(messages, out, 1s);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(out[i].delivery, Delivery::kRejected) << i;
      EXPECT_EQ(out[i].error, "e" + std::to_string(i) + "/{\"n\":" + std::to_string(i) + "}/" +
                                  std::to_string(1000 + i));
    } else {
      EXPECT_EQ(out[i].delivery, Delivery::kAcked) << i;
    }
  }
  EXPECT_TRUE(sink->take_log().empty());
}

// An outcome's error is cut at 4 KiB, at its first NUL, and cleaned of control characters.
TEST_F(PluginHostTest, OutcomeErrorTexts) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  auto sink = host.create({});
  const std::string long_id(10000, 'y');
  const std::string odd_id("a\nb\0c", 5);
  Message m;
  m.id = long_id;
  std::vector<Outcome> out(1);
  behaviour.delivery = OUTBOX_DELIVERY_REJECTED;
  sink->send({m}, out, 1s);
  EXPECT_EQ(out[0].error, std::string(4096, 'y'));
  m.id = odd_id;
  sink->send({m}, out, 1s);
  EXPECT_EQ(out[0].error, "a b");
}

TEST_F(PluginHostTest, OptionsAndLifetime) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  ASSERT_EQ(host.options().count, 2u);
  EXPECT_EQ(host.options().find("password")->kind, OptionKind::kSecret);
  {
    auto sink = host.create({{"servers", "a"}});
    EXPECT_EQ(sink->describe(), "test sink");
  }
  EXPECT_EQ(behaviour.destroyed, 1);
  behaviour.create_status = OUTBOX_SINK_CONFIG_ERROR;
  EXPECT_THROW(host.create({}), ConfigError);
  behaviour.create_status = OUTBOX_SINK_UNAVAILABLE;
  try {
    host.create({});
    FAIL();
  } catch (const ConfigError&) {
    FAIL() << "UNAVAILABLE is not a configuration error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no such thing: option x");
  }
  EXPECT_EQ(behaviour.destroyed, 1);  // a sink that was not created is not destroyed
}

TEST_F(PluginHostTest, UnsetOutcomeIsUnavailableAndReported) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  auto sink = host.create({});
  std::vector<Message> messages(2);
  messages[0].id = "e1";
  messages[1].id = "e2";
  behaviour.leave_outcome = true;
  std::vector<Outcome> out(2);
  sink->send(messages, out, 1s);
  EXPECT_EQ(out[0].delivery, Delivery::kAcked);
  EXPECT_EQ(out[1].delivery, Delivery::kUnavailable);
  EXPECT_NE(out[1].error.find("set no outcome"), std::string::npos);
  behaviour.leave_outcome = false;
  behaviour.delivery = 42;
  sink->send(messages, out, 1s);
  EXPECT_EQ(out[0].delivery, Delivery::kUnavailable);
  // Reported once, as a warning naming the sink.
  auto lines = sink->take_log();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, 4);
  EXPECT_NE(lines[0].text.find("sink test broke the sink interface"), std::string::npos);
  EXPECT_TRUE(sink->take_log().empty());
}

TEST_F(PluginHostTest, BatchStatuses) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  auto sink = host.create({});
  Message m;
  m.id = "e1";
  std::vector<Outcome> out(1);
  behaviour.start_status = OUTBOX_SINK_CONFIG_ERROR;
  EXPECT_THROW(sink->send({m}, out, 1s), ConfigError);
  EXPECT_TRUE(sink->usable());
  behaviour.start_status = OUTBOX_SINK_UNAVAILABLE;
  try {
    sink->send({m}, out, 1s);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "broker said no (second line)");  // no line break reaches the log
  }
  behaviour.unterminated_error = true;
  try {
    sink->send({m}, out, 1s);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), std::string(OUTBOX_SINK_ERROR_SIZE, 'x'));
  }
  behaviour.unterminated_error = false;
  behaviour.start_status = OUTBOX_SINK_FATAL;
  EXPECT_THROW(sink->send({m}, out, 1s), std::runtime_error);
  EXPECT_FALSE(sink->usable());
}

TEST_F(PluginHostTest, KeepWaitingFromAnotherThreadIsRefused) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  auto sink = host.create({});
  behaviour.wait_from_other_thread = true;
  Message m;
  m.id = "e1";
  std::vector<Outcome> out(1);
  sink->send({m}, out, 1s);
  EXPECT_EQ(behaviour.waits_seen, 0);
  auto lines = sink->take_log();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].text.find("keep_waiting()"), std::string::npos);
  // From the thread inside start(), it answers.
  EXPECT_EQ(out[0].delivery, Delivery::kAcked);
}

TEST_F(PluginHostTest, KeepWaitingOutsideABatchIsRefused) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  behaviour.wait_in_create = true;
  auto sink = host.create({});
  EXPECT_EQ(behaviour.waits_seen, 0);
  auto lines = sink->take_log();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].text.find("outside start() or finish()"), std::string::npos);
}

// The values of options declared secret never leave the host, whatever the sink writes: its
// description, errors and outcomes are redacted, each key of a rotation file too.
TEST_F(PluginHostTest, DeclaredSecretsAreRedacted) {
  OutboxSinkCallbacks t = good_table();
  PluginHost host(&t, "test");
  auto sink = host.create({{"password", "whsec_first-key-1234 whsec_second-key-5678"}});
  EXPECT_EQ(sink->describe(), "test sink[redacted]");
  Message m;
  m.id = "e1";
  std::vector<Outcome> out(1);
  behaviour.delivery = OUTBOX_DELIVERY_REJECTED;
  behaviour.password = " whsec_second-key-5678";
  sink->send({m}, out, 1s);
  EXPECT_EQ(out[0].error, "e1 [redacted]");
  behaviour.start_status = OUTBOX_SINK_UNAVAILABLE;
  try {
    sink->send({m}, out, 1s);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "broker said no (second line) [redacted]");
  }
}

}  // namespace
