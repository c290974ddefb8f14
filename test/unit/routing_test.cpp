#include "sinks/kafka/routing.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using outbox::sinks::ConfigError;
using outbox::sinks::Message;
namespace routing = outbox::sinks::routing;

Message event(std::string_view aggregatetype, std::string_view type = "OrderCreated") {
  Message m;
  m.id = "0190a6e0-0000-7000-8000-000000000001";
  m.aggregatetype = aggregatetype;
  m.aggregateid = "order-42";
  m.type = type;
  m.payload = R"({"total": 10})";
  return m;
}

std::string config_error(std::string_view text) {
  try {
    routing::TopicTemplate t(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

TEST(Routing, DefaultTemplateIsDebeziums) {
  routing::TopicTemplate t;
  EXPECT_EQ(t.text(), "outbox.event.${aggregatetype}");
  EXPECT_EQ(t.render(event("order")), "outbox.event.order");
  EXPECT_FALSE(t.is_fixed());
}

TEST(Routing, Placeholders) {
  EXPECT_EQ(routing::TopicTemplate("${aggregatetype}").render(event("order")), "order");
  EXPECT_EQ(routing::TopicTemplate("events.${aggregatetype}.${type}").render(event("order")),
            "events.order.OrderCreated");
  EXPECT_EQ(routing::TopicTemplate("${type}-${type}").render(event("x", "T")), "T-T");
  // Debezium's name for the routing field's value.
  EXPECT_EQ(routing::TopicTemplate("outbox.event.${routedByValue}").render(event("order")),
            "outbox.event.order");
}

TEST(Routing, FixedTopic) {
  routing::TopicTemplate t("all-events");
  EXPECT_TRUE(t.is_fixed());
  EXPECT_EQ(t.render(event("order")), "all-events");
  EXPECT_EQ(t.render(event("customer")), "all-events");
}

TEST(Routing, BadTemplates) {
  EXPECT_NE(config_error("").find("must not be empty"), std::string::npos);
  std::string e = config_error("outbox.${aggregateid}");
  EXPECT_NE(e.find("topic.template: "), std::string::npos) << e;
  EXPECT_NE(e.find("unknown placeholder ${aggregateid}"), std::string::npos) << e;
  EXPECT_NE(config_error("outbox.${aggregatetype").find("unterminated"), std::string::npos);
  EXPECT_NE(config_error("${}").find("unknown placeholder ${}"), std::string::npos);
  EXPECT_NE(config_error("${AggregateType}").find("unknown placeholder"), std::string::npos);
  e = config_error("outbox/${aggregatetype}");
  EXPECT_NE(e.find("'/' cannot appear in a Kafka topic name"), std::string::npos) << e;
  EXPECT_NE(e.find("(at position 6 of \"outbox/${aggregatetype}\")"), std::string::npos) << e;
  EXPECT_NE(config_error("cost in $").find("' '"), std::string::npos);
  EXPECT_NE(config_error("cost.$").find("'$'"), std::string::npos);
  EXPECT_NE(config_error("..").find("not a valid Kafka topic name"), std::string::npos);
  EXPECT_NE(config_error(std::string(250, 'a')).find("250 characters"), std::string::npos);
  EXPECT_EQ(config_error(std::string(249, 'a')), "none");
  EXPECT_NE(config_error(std::string(249, 'a') + "${type}").find("literal text alone"),
            std::string::npos);
}

TEST(Routing, TopicNames) {
  EXPECT_EQ(routing::topic_name_error("outbox.event.order"), "");
  EXPECT_EQ(routing::topic_name_error("A-z_0.9"), "");
  EXPECT_EQ(routing::topic_name_error(std::string(249, 'x')), "");
  EXPECT_EQ(routing::topic_name_error("..."), "");
  EXPECT_NE(routing::topic_name_error(""), "");
  EXPECT_NE(routing::topic_name_error("."), "");
  EXPECT_NE(routing::topic_name_error(".."), "");
  std::string e = routing::topic_name_error(std::string(250, 'x'));
  EXPECT_NE(e.find("250 characters, the limit is 249"), std::string::npos) << e;
  e = routing::topic_name_error("outbox.event.sales order");
  EXPECT_NE(e.find("' ' at position 18"), std::string::npos) << e;
  EXPECT_NE(e.find("\"outbox.event.sales order\""), std::string::npos) << e;
  e = routing::topic_name_error("outbox.event.z\xc3\xa4hler");
  EXPECT_NE(e.find("byte 0xc3 at position 14"), std::string::npos) << e;
  EXPECT_NE(e.find("z\\xc3\\xa4hler"), std::string::npos) << e;  // escaped in the message
  e = routing::topic_name_error("a\"b");
  EXPECT_NE(e.find("\"a\\x22b\""), std::string::npos) << e;
}

TEST(Routing, RouteTopicRejectsInsteadOfMangling) {
  routing::TopicTemplate t;
  std::string topic, error;
  EXPECT_TRUE(routing::route_topic(t, event("order"), topic, error));
  EXPECT_EQ(topic, "outbox.event.order");
  EXPECT_EQ(error, "");

  EXPECT_FALSE(routing::route_topic(t, event("sales/order"), topic, error));
  EXPECT_NE(error.find("'/'"), std::string::npos) << error;

  // aggregatetype may hold 255 characters; with the prefix the name is too long.
  std::string long_type(255, 'a');
  EXPECT_FALSE(routing::route_topic(t, event(long_type), topic, error));
  EXPECT_NE(error.find("268 characters"), std::string::npos) << error;
  EXPECT_LT(error.size(), 300u);  // the name is cut in the message

  routing::TopicTemplate bare("${aggregatetype}");
  EXPECT_FALSE(routing::route_topic(bare, event(""), topic, error));
  EXPECT_NE(error.find("empty"), std::string::npos) << error;
  EXPECT_FALSE(routing::route_topic(bare, event(".."), topic, error));
}

TEST(Routing, KeyIsAggregateId) { EXPECT_EQ(routing::message_key(event("order")), "order-42"); }

TEST(Routing, HeadersIdTypeThenOwn) {
  Message m = event("order");
  auto h = routing::message_headers(m);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], routing::Header("id", m.id));
  EXPECT_EQ(h[1], routing::Header("type", "OrderCreated"));

  m.headers = {{"traceparent", "00-abc-def-01"}, {"tenant", "t1"}, {"id", "spoofed"}};
  h = routing::message_headers(m);
  ASSERT_EQ(h.size(), 5u);
  EXPECT_EQ(h[0], routing::Header("id", m.id));
  EXPECT_EQ(h[1], routing::Header("type", "OrderCreated"));
  EXPECT_EQ(h[2], routing::Header("traceparent", "00-abc-def-01"));
  EXPECT_EQ(h[3], routing::Header("tenant", "t1"));
  // Sent as well, after the routing ones (documented in routing.hpp).
  EXPECT_EQ(h[4], routing::Header("id", "spoofed"));

  EXPECT_TRUE(outbox::is_reserved_header("id"));
  EXPECT_TRUE(outbox::is_reserved_header("type"));
  EXPECT_FALSE(outbox::is_reserved_header("tenant"));
  EXPECT_FALSE(outbox::is_reserved_header("ID"));
}

}  // namespace
