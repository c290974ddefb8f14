// label_value_escaped: what outbox.metrics() writes inside a label's quotes must be valid
// UTF-8 whatever the name's bytes (promtool refuses it otherwise), keep different names
// different, and escape as the exposition format says.
#include <string>

#include <gtest/gtest.h>

#include "core/label_value.hpp"

namespace outbox {
namespace {

std::string utf8(std::string_view value) { return label_value_escaped(value, utf8_char_length); }

TEST(LabelValue, PlainTextAsItIs) {
  EXPECT_EQ(utf8(""), "");
  EXPECT_EQ(utf8("postgres"), "postgres");
  EXPECT_EQ(utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(LabelValue, TheExpositionEscapes) { EXPECT_EQ(utf8("a\\b\"c\nd"), "a\\\\b\\\"c\\nd"); }

TEST(LabelValue, InvalidBytesAsHexEscapes) {
  // The SQL_ASCII database of issue 49: \xff\xfe read back as the characters \xff\xfe.
  EXPECT_EQ(utf8("\xff\xfe"), "\\\\xff\\\\xfe");
  EXPECT_EQ(utf8("db\xe9"), "db\\\\xe9");  // Latin-1 é alone
  // Different names stay different.
  EXPECT_NE(utf8("\xff\xfe"), utf8("\xfe\xff"));
}

TEST(LabelValue, StrictUtf8) {
  EXPECT_EQ(utf8("\xc0\xaf"), "\\\\xc0\\\\xaf");                        // overlong /
  EXPECT_EQ(utf8("\xe0\x80\xaf"), "\\\\xe0\\\\x80\\\\xaf");             // overlong, three bytes
  EXPECT_EQ(utf8("\xed\xa0\x80"), "\\\\xed\\\\xa0\\\\x80");             // a surrogate
  EXPECT_EQ(utf8("\xf4\x90\x80\x80"), "\\\\xf4\\\\x90\\\\x80\\\\x80");  // above U+10FFFF
  EXPECT_EQ(utf8("\xe2\x82"), "\\\\xe2\\\\x82");                        // cut short at the end
  EXPECT_EQ(utf8("\xe2\x82x"), "\\\\xe2\\\\x82x");                      // cut short before ASCII
  EXPECT_EQ(utf8("\x80"), "\\\\x80");                                   // a lone continuation byte
}

TEST(LabelValue, AValidCharacterAfterAnInvalidByteIsKept) {
  EXPECT_EQ(utf8("\xff\xc3\xa9"), "\\\\xff\xc3\xa9");
}

TEST(LabelValue, NulIsEscaped) { EXPECT_EQ(utf8(std::string_view("a\0b", 3)), "a\\\\x00b"); }

TEST(LabelValue, AnotherEncodingsRule) {
  // A single-byte encoding where every byte is a character: nothing to escape but the three.
  auto any_byte = [](const unsigned char*, std::size_t) -> std::size_t { return 1; };
  EXPECT_EQ(label_value_escaped("\xe9t\xe9\"", any_byte), "\xe9t\xe9\\\"");
}

}  // namespace
}  // namespace outbox
