#include "core/event_rules.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.hpp"

namespace {

std::string code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const outbox::Error& e) {
    return e.code();
  }
  return "none";
}

TEST(EventRules, RequiredText) {
  using outbox::check_required_text;
  EXPECT_EQ(code_of([] { check_required_text("f", "type", true, 0); }), "22004");
  EXPECT_EQ(code_of([] { check_required_text("f", "type", false, 0); }), "22023");
  EXPECT_EQ(code_of([] { check_required_text("f", "type", false, 256); }), "22001");
  EXPECT_EQ(code_of([] { check_required_text("f", "type", false, 255); }), "none");
  EXPECT_EQ(code_of([] { check_required_text("f", "type", false, 1); }), "none");
}

TEST(EventRules, MessageNamesFunctionAndField) {
  try {
    outbox::check_required_text("outbox.enqueue", "aggregateid", false, 300);
    FAIL();
  } catch (const outbox::Error& e) {
    EXPECT_EQ(std::string(e.what()), "outbox.enqueue: aggregateid is too long");
    EXPECT_NE(e.detail().find("300"), std::string::npos);
  }
}

TEST(EventRules, Payload) {
  EXPECT_EQ(code_of([] { outbox::check_payload("f", true, 0, 10); }), "22004");
  EXPECT_EQ(code_of([] { outbox::check_payload("f", false, 11, 10); }), "54000");
  EXPECT_EQ(code_of([] { outbox::check_payload("f", false, 10, 10); }), "none");
}

TEST(EventRules, HeadersSize) {
  EXPECT_EQ(code_of([] { outbox::check_headers_size("f", 11, 10); }), "54000");
  EXPECT_EQ(code_of([] { outbox::check_headers_size("f", 10, 10); }), "none");
  EXPECT_EQ(code_of([] { outbox::check_headers_size("f", 1, 0); }), "54000");
}

TEST(EventRules, Headers) {
  using outbox::HeadersShape;
  using outbox::HeaderValueKind;
  EXPECT_EQ(code_of([] { outbox::check_headers_shape("f", HeadersShape::kNotObject); }), "22023");
  EXPECT_EQ(code_of([] { outbox::check_headers_shape("f", HeadersShape::kObject); }), "none");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "", HeaderValueKind::kString); }), "22023");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "k", HeaderValueKind::kOther); }), "22023");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "k", HeaderValueKind::kString); }), "none");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "id", HeaderValueKind::kString); }), "22023");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "type", HeaderValueKind::kString); }), "22023");
  EXPECT_EQ(code_of([] { outbox::check_header("f", "ID", HeaderValueKind::kString); }), "none");
}

}  // namespace
