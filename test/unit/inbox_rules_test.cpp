#include "core/inbox_rules.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace {

outbox::Uuid v7_at(std::int64_t ms) {
  outbox::Uuid7Generator gen;
  return gen.next(ms, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

std::string code_of(const outbox::Uuid* id, std::optional<std::int64_t> given) {
  try {
    outbox::inbox_event_unix_us(id, given);
  } catch (const outbox::Error& e) {
    return e.code();
  }
  return "none";
}

TEST(InboxRules, Uuid7TimeWinsOverAGivenTime) {
  const outbox::Uuid id = v7_at(1796032677257);
  EXPECT_TRUE(outbox::is_uuid7(id));
  EXPECT_EQ(outbox::inbox_event_unix_us(&id, std::nullopt), 1796032677257000);
  // Every copy files under the id's time, whatever time a caller passes along.
  EXPECT_EQ(outbox::inbox_event_unix_us(&id, 42), 1796032677257000);
}

TEST(InboxRules, OtherIdsNeedTheirTime) {
  // A version 4 id (550e8400-e29b-41d4-a716-446655440000).
  const outbox::Uuid v4 = {0x55, 0x0e, 0x84, 0x00, 0xe2, 0x9b, 0x41, 0xd4,
                           0xa7, 0x16, 0x44, 0x66, 0x55, 0x44, 0x00, 0x00};
  EXPECT_FALSE(outbox::is_uuid7(v4));
  EXPECT_EQ(outbox::inbox_event_unix_us(&v4, 1234567), 1234567);
  EXPECT_EQ(code_of(&v4, std::nullopt), "22023");
  // Version 7 with a variant other than 10 is not a UUIDv7.
  outbox::Uuid odd = v7_at(1000);
  odd[8] = 0xC0;
  EXPECT_FALSE(outbox::is_uuid7(odd));
  EXPECT_EQ(code_of(&odd, std::nullopt), "22023");
}

TEST(InboxRules, NullAndNilIdsAreRefused) {
  EXPECT_EQ(code_of(nullptr, 1), "22004");
  const outbox::Uuid nil{};
  EXPECT_EQ(code_of(&nil, 1), "22023");
}

}  // namespace

namespace {
std::string name_code(std::string_view name) {
  try {
    outbox::check_consumer_name("f", name);
  } catch (const outbox::Error& e) {
    return e.code();
  }
  return "none";
}
}  // namespace

TEST(InboxRules, ConsumerNames) {
  EXPECT_EQ(name_code("billing"), "none");
  EXPECT_EQ(name_code("Billing"), "none");  // case matters, as in a quoted identifier
  EXPECT_EQ(name_code("billing eu"), "none");
  EXPECT_EQ(name_code("\xc3\xa9quipe"), "none");  // UTF-8 is bytes >= 0x80
  EXPECT_EQ(name_code("billing "), "22023");
  EXPECT_EQ(name_code(" billing"), "22023");
  EXPECT_EQ(name_code(" "), "22023");
  EXPECT_EQ(name_code("bill\ting"), "22023");
  EXPECT_EQ(name_code("billing\n"), "22023");
  EXPECT_EQ(name_code("bill\x7fing"), "22023");
  EXPECT_EQ(name_code(std::string_view("bill\0ing", 8)), "22023");
}
