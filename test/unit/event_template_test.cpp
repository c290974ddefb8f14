// The one ${...} template of every sink (src/sinks/common/event_template.hpp): parsing, the rules
// each sink gives it, and rendering. The sinks' own tests hold their templates' extra checks.
#include <gtest/gtest.h>

#include <string>

#include "message_support.hpp"
#include "sinks/common/event_template.hpp"
#include "sinks/common/quoted.hpp"

namespace {

using outbox::sinks::test::event_message;

using outbox::sinks::ConfigError;
using outbox::sinks::EventTemplate;
using outbox::sinks::Message;

std::string no_digits(char c) { return c >= '0' && c <= '9' ? "a digit" : ""; }
std::string bracketed(std::string_view value) { return "[" + std::string(value) + "]"; }

const EventTemplate::Rules kAll{
    "t", EventTemplate::kAggregateType | EventTemplate::kAggregateId | EventTemplate::kType};
const EventTemplate::Rules kTypeOnly{"t", EventTemplate::kType, &no_digits, &bracketed};

std::string error_of(std::string_view text, const EventTemplate::Rules& rules) {
  try {
    EventTemplate t(text, rules);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

// The views point at the literals.
TEST(EventTemplate, RendersEachPlaceholderWithTheEncoder) {
  const EventTemplate all("a/${aggregatetype}/${aggregateid}/${type}${type}", kAll);
  EXPECT_EQ(all.render(event_message("order", "42", "T")), "a/order/42/TT");
  EXPECT_FALSE(all.is_fixed());
  EXPECT_EQ(all.literal_size(), 4u);
  EXPECT_EQ(all.shape("x"), "a/x/x/xx");
  const EventTemplate typed("x-${type}", kTypeOnly);
  EXPECT_EQ(typed.render(event_message("order", "42", "T")), "x-[T]");
  const EventTemplate fixed("plain", kAll);
  EXPECT_TRUE(fixed.is_fixed());
  EXPECT_EQ(fixed.render(event_message("a", "b", "c")), "plain");
}

TEST(EventTemplate, RefusalsNameTheOptionThePositionAndWhatIsKnown) {
  EXPECT_EQ(error_of("", kAll), "t: must not be empty");
  EXPECT_EQ(error_of("ab${type", kAll), "t: unterminated \"${\" at position 2 in \"ab${type\"");
  EXPECT_EQ(error_of("${aggregateid}", kTypeOnly),
            "t: unknown placeholder ${aggregateid} in \"${aggregateid}\" (known: ${type})");
  EXPECT_EQ(error_of("${x\x01}", kAll),
            "t: unknown placeholder ${x\\x01} in \"${x\\x01}\" (known: ${aggregatetype}, "
            "${aggregateid}, ${type})");
  EXPECT_EQ(error_of("ab7", kTypeOnly), "t: a digit (at position 2 of \"ab7\")");
  EXPECT_EQ(error_of("${routedByValue}", kAll).rfind("t: unknown placeholder ${routedByValue}", 0),
            0u);
  EventTemplate::Rules debezium = kAll;
  debezium.routed_by_value = true;
  EXPECT_EQ(EventTemplate("${routedByValue}", debezium).render(event_message("order", "1", "T")),
            "order");
}

TEST(EventTemplate, QuotedEscapesAndCuts) {
  EXPECT_EQ(outbox::sinks::quoted("a\"b\\c\xc3"), "\"a\\x22b\\x5cc\\xc3\"");
  EXPECT_EQ(outbox::sinks::quoted(std::string(100, 'z'), 3), "\"zzz...\"");
}

}  // namespace
