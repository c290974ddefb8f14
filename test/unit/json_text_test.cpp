// write_json_escaped must write what PostgreSQL's escape_json writes: the relay sends its
// output as the payload's text, where payload::text would have been. The expected strings
// are PostgreSQL 15's output (SELECT to_jsonb(<text>)::text); 011_relay_kafka.pl compares
// the two through a live server as well.
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/json_text.hpp"

namespace outbox {
namespace {

// What the relay writes for a string value: quotes around write_json_escaped().
std::string quoted(const std::string& s) {
  std::string out(json_escaped_max_size(s.size()), '\0');
  char* end = write_json_escaped(s.data(), s.size(), out.data());
  out.resize(end - out.data());
  return "\"" + out + "\"";
}

TEST(JsonText, PlainTextIsOnlyQuoted) {
  EXPECT_EQ(quoted(""), "\"\"");
  EXPECT_EQ(quoted("OrderPlaced"), "\"OrderPlaced\"");
  EXPECT_EQ(quoted("a b/c'd"), "\"a b/c'd\"");  // no escape for / or '
}

TEST(JsonText, TheSevenShortEscapes) {
  EXPECT_EQ(quoted("\"\\\b\f\n\r\t"), "\"\\\"\\\\\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(quoted("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
}

TEST(JsonText, OtherControlBytesAsLowercaseUnicodeEscapes) {
  EXPECT_EQ(quoted(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(quoted("\x1b[0m"), "\"\\u001b[0m\"");
  EXPECT_EQ(quoted("\x1f\x0b"), "\"\\u001f\\u000b\"");
}

TEST(JsonText, DeleteAndUtf8PassThrough) {
  EXPECT_EQ(quoted("\x7f"), "\"\x7f\"");
  EXPECT_EQ(quoted("Zürich ✓ 😀"), "\"Zürich ✓ 😀\"");
}

TEST(JsonText, EscapesAtBothEndsAndInRuns) {
  EXPECT_EQ(quoted("\n"), "\"\\n\"");
  EXPECT_EQ(quoted("\nx\n"), "\"\\nx\\n\"");
  EXPECT_EQ(quoted("\\\\\\"), "\"\\\\\\\\\\\\\"");
}

TEST(JsonText, WorstCaseFitsTheBound) {
  const std::string all_control(1000, '\x01');
  const std::string out = quoted(all_control);
  EXPECT_EQ(out.size(), json_escaped_max_size(all_control.size()) + 2);
  EXPECT_EQ(out.substr(0, 13), "\"\\u0001\\u0001");
}

// The relay escapes a long string in pieces: any split gives the same bytes.
TEST(JsonText, PiecesGiveTheSameBytes) {
  const std::string s = "ab\n\"\\\x01z\xc3\xa9";
  const std::string whole = quoted(s);
  for (std::size_t cut = 0; cut <= s.size(); ++cut) {
    std::string out(json_escaped_max_size(s.size()), '\0');
    char* end = write_json_escaped(s.data(), cut, out.data());
    end = write_json_escaped(s.data() + cut, s.size() - cut, end);
    out.resize(end - out.data());
    EXPECT_EQ("\"" + out + "\"", whole) << "cut at " << cut;
  }
}

// The rule, written out independently: PostgreSQL's escape_json.
std::string escaped_by_rule(int c) {
  static const std::map<int, std::string> kShort = {{'\b', "\\b"}, {'\f', "\\f"}, {'\n', "\\n"},
                                                    {'\r', "\\r"}, {'\t', "\\t"}, {'"', "\\\""},
                                                    {'\\', "\\\\"}};
  const auto it = kShort.find(c);
  if (it != kShort.end()) return it->second;
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    return buf;
  }
  return std::string(1, static_cast<char>(c));
}

TEST(JsonText, EveryByteAgainstTheRule) {
  for (int c = 1; c < 256; ++c) {
    EXPECT_EQ(quoted(std::string(1, static_cast<char>(c))), "\"" + escaped_by_rule(c) + "\"")
        << "byte " << c;
  }
}

}  // namespace
}  // namespace outbox
