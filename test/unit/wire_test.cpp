// The frames between the relay and the sink host (sinks/host/wire.hpp): every message survives a
// round trip, and a truncated or garbled frame is a WireError, never a read past its end.
#include <gtest/gtest.h>

#include <string>

#include "sinks/host/wire.hpp"

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;

// A frame's type and body, from its bytes.
wire::Reader body_of(const std::string& frame, wire::Type expected, std::string& storage) {
  char header[wire::kHeaderBytes];
  frame.copy(header, sizeof(header));
  EXPECT_EQ(wire::body_length(header), frame.size() - wire::kHeaderBytes);
  EXPECT_EQ(static_cast<wire::Type>(header[4]), expected);
  storage = frame.substr(wire::kHeaderBytes);
  return wire::Reader(storage);
}

TEST(Wire, CreateRoundTrip) {
  wire::Writer w;
  wire::encode(w, wire::CreateRequest{"/lib/outbox_sink_kafka.so",
                                      "kafka",
                                      {{"bootstrap.servers", "b:9092"}, {"password", ""}}});
  std::string storage;
  wire::Reader r = body_of(w.frame(wire::Type::kCreate), wire::Type::kCreate, storage);
  const wire::CreateRequest got = wire::decode_create(r);
  EXPECT_EQ(got.library, "/lib/outbox_sink_kafka.so");
  EXPECT_EQ(got.name, "kafka");
  ASSERT_EQ(got.options.size(), 2u);
  EXPECT_EQ(got.options[0].first, "bootstrap.servers");
  EXPECT_EQ(got.options[0].second, "b:9092");
  EXPECT_EQ(got.options[1].second, "");
}

TEST(Wire, BatchRoundTrip) {
  const std::string binary("a\0b", 3);
  std::vector<Message> messages(2);
  messages[0].id = "id-1";
  messages[0].aggregatetype = "order";
  messages[0].aggregateid = "42";
  messages[0].type = "created";
  messages[0].payload = binary;
  messages[0].headers = {{"h1", "v1"}, {"h2", ""}};
  messages[0].created_at_unix_us = -5;
  messages[1].id = "id-2";
  messages[1].payload = "{}";
  wire::Writer w;
  wire::encode_batch(w, 1500ms, messages);
  std::string storage;
  wire::Reader r = body_of(w.frame(wire::Type::kStart), wire::Type::kStart, storage);
  std::vector<Message> got;
  EXPECT_EQ(wire::decode_batch(r, got), 1500ms);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, "id-1");
  EXPECT_EQ(got[0].aggregatetype, "order");
  EXPECT_EQ(got[0].aggregateid, "42");
  EXPECT_EQ(got[0].type, "created");
  EXPECT_EQ(got[0].payload, binary);
  ASSERT_EQ(got[0].headers.size(), 2u);
  EXPECT_EQ(got[0].headers[1].first, "h2");
  EXPECT_EQ(got[0].headers[1].second, "");
  EXPECT_EQ(got[0].created_at_unix_us, -5);
  EXPECT_EQ(got[1].payload, "{}");
  EXPECT_TRUE(got[1].headers.empty());
  // The views point into the frame's body: no copy of the payloads.
  EXPECT_GE(got[1].payload.data(), storage.data());
  EXPECT_LT(got[1].payload.data(), storage.data() + storage.size());
}

TEST(Wire, RepliesRoundTrip) {
  wire::Writer w;
  wire::encode(w, wire::Reply{wire::Status::kConfigError, "no topic", false});
  std::vector<Outcome> outcomes = {{Delivery::kAcked, ""},
                                   {Delivery::kRejected, "too large"},
                                   {Delivery::kDeferred, "after 1"},
                                   {Delivery::kUnavailable, "down"}};
  wire::encode(w, outcomes);
  std::string storage;
  wire::Reader r = body_of(w.frame(wire::Type::kFinished), wire::Type::kFinished, storage);
  const wire::Reply reply = wire::decode_reply(r);
  EXPECT_EQ(reply.status, wire::Status::kConfigError);
  EXPECT_EQ(reply.error, "no topic");
  EXPECT_FALSE(reply.usable);
  std::vector<Outcome> got(4);
  wire::decode_outcomes(r, got, 4);
  r.end();
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].delivery, outcomes[i].delivery);
    EXPECT_EQ(got[i].error, outcomes[i].error);
  }

  wire::encode(w, wire::Created{"kafka to b:9092", 1000000});
  wire::Reader c = body_of(w.frame(wire::Type::kCreated), wire::Type::kCreated, storage);
  const wire::Created created = wire::decode_created(c);
  EXPECT_EQ(created.description, "kafka to b:9092");
  EXPECT_EQ(created.max_message_bytes, 1000000u);

  wire::encode(w, std::vector<LogLine>{{3, "broker down"}, {7, "debug"}});
  wire::Reader l = body_of(w.frame(wire::Type::kLog), wire::Type::kLog, storage);
  const std::vector<LogLine> lines = wire::decode_log(l);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, 3);
  EXPECT_EQ(lines[0].text, "broker down");
  EXPECT_EQ(lines[1].level, 7);
}

TEST(Wire, OutcomeCountMustMatchTheBatch) {
  wire::Writer w;
  wire::encode(w, std::vector<Outcome>(3));
  std::string storage;
  wire::Reader r = body_of(w.frame(wire::Type::kFinished), wire::Type::kFinished, storage);
  std::vector<Outcome> got(2);
  EXPECT_THROW(wire::decode_outcomes(r, got, 2), wire::WireError);
}

TEST(Wire, TruncatedOrGarbledFramesAreErrors) {
  std::vector<Message> messages(1);
  messages[0].payload = "payload";
  wire::Writer w;
  wire::encode_batch(w, 1s, messages);
  const std::string body = w.frame(wire::Type::kStart).substr(wire::kHeaderBytes);
  // Every prefix of the body is refused.
  for (std::size_t n = 0; n < body.size(); ++n) {
    const std::string cut = body.substr(0, n);
    wire::Reader r(cut);
    std::vector<Message> got;
    EXPECT_THROW(wire::decode_batch(r, got), wire::WireError) << n;
  }
  // Bytes left over are refused too.
  const std::string longer = body + "x";
  wire::Reader r(longer);
  std::vector<Message> got;
  EXPECT_THROW(wire::decode_batch(r, got), wire::WireError);
  // A header announcing more than a frame may hold.
  const char header[wire::kHeaderBytes] = {'\xff', '\xff', '\xff', '\xff', 1};
  EXPECT_THROW(wire::body_length(header), wire::WireError);
  // An unknown status or delivery.
  const std::string bad_status("\x07\0\0\0\0\x01", 6);
  wire::Reader s(bad_status);
  EXPECT_THROW(wire::decode_reply(s), wire::WireError);
}

}  // namespace
