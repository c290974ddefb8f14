#include "sinks/common/cloudevents.hpp"

#include <gtest/gtest.h>

namespace {

using namespace outbox::sinks;

TEST(CloudEvents, Attributes) {
  Message m;
  m.id = "0190a5c4-0000-7000-8000-000000000001";
  m.type = "OrderCreated";
  m.aggregateid = "o-1";
  m.created_at_unix_us = 1764607262123456;  // 2025-12-01T16:41:02.123456Z
  const auto a = cloudevents::attributes(m, "/shop");
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a[0], (cloudevents::Attribute{"specversion", "1.0"}));
  EXPECT_EQ(a[1].second, m.id);
  EXPECT_EQ(a[2].second, "/shop");
  EXPECT_EQ(a[3].second, "OrderCreated");
  EXPECT_EQ(a[4].second, "o-1");
  EXPECT_EQ(a[5], (cloudevents::Attribute{"time", "2025-12-01T16:41:02.123456Z"}));
  EXPECT_EQ(a[6].second, "application/json");
  EXPECT_EQ(cloudevents::rfc3339(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(cloudevents::rfc3339(-1), "1969-12-31T23:59:59.999999Z");
}

TEST(CloudEvents, Settings) {
  Options options = {{"servers", "x"}, {"cloudevents", "true"}, {"cloudevents.source", "/a"}};
  auto s = cloudevents::take_settings(options);
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.source, "/a");
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].first, "servers");
  Options off = {{"cloudevents", "false"}};
  EXPECT_FALSE(cloudevents::take_settings(off).enabled);
  EXPECT_EQ(cloudevents::take_settings(off).source, "/outbox");
  Options orphan = {{"cloudevents.source", "/a"}};
  EXPECT_THROW(cloudevents::take_settings(orphan), ConfigError);
  Options empty = {{"cloudevents", "true"}, {"cloudevents.source", ""}};
  EXPECT_THROW(cloudevents::take_settings(empty), ConfigError);
}

}  // namespace
