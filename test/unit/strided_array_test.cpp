// A plugin built against an older outbox_sink.h under a newer relay, whose message and
// outcome have grown (the relay's side of the ABI's growth; the reverse, a plugin newer than
// the relay, is PluginHostTest.StridesOfAGrownLayout). Version 2 is the first layout, so
// "newer" here is a relay struct with fields added at the end, as a later release would add.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "include/outbox_sink.h"
#include "sinks/host/strided_array.hpp"

namespace {

using outbox::sinks::StridedArray;

struct NewerMessage {
  OutboxSinkMessage known;
  int64_t added_later[3];
};
struct NewerOutcome {
  OutboxSinkOutcome known;
  int64_t added_later[2];
};

TEST(StridedArray, AnOlderPluginReadsTheMessagesItKnows) {
  const std::string ids[3] = {"e0", "e1", "e2"};
  StridedArray messages;
  messages.reset(3, sizeof(OutboxSinkMessage));  // the older plugin's message_size
  for (std::size_t i = 0; i < 3; ++i) {
    NewerMessage m{};
    m.known.id = {ids[i].data(), ids[i].size()};
    m.known.created_at_unix_us = 1000 + static_cast<int64_t>(i);
    m.added_later[0] = m.added_later[1] = m.added_later[2] = -1;  // never reaches the plugin
    messages.put(i, m);
  }
  // What the plugin reads: an array of its own, shorter structs.
  const auto* seen = static_cast<const OutboxSinkMessage*>(messages.data());
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::string(seen[i].id.data, seen[i].id.len), ids[i]) << i;
    EXPECT_EQ(seen[i].created_at_unix_us, 1000 + static_cast<int64_t>(i)) << i;
    EXPECT_EQ(seen[i].header_count, 0u) << i;
  }
}

TEST(StridedArray, AnOlderPluginsOutcomesReadWithTheAddedFieldsZeroed) {
  StridedArray outcomes;
  outcomes.reset(2, sizeof(OutboxSinkOutcome));  // the older plugin's outcome_size
  auto* written = static_cast<OutboxSinkOutcome*>(outcomes.data());
  const std::string error = "too large";
  written[0].delivery = OUTBOX_DELIVERY_REJECTED;
  written[0].error = error.data();
  written[0].error_len = error.size();
  written[1].delivery = OUTBOX_DELIVERY_ACKED;
  const NewerOutcome first = outcomes.get<NewerOutcome>(0);
  const NewerOutcome second = outcomes.get<NewerOutcome>(1);
  EXPECT_EQ(first.known.delivery, OUTBOX_DELIVERY_REJECTED);
  EXPECT_EQ(std::string(first.known.error, first.known.error_len), error);
  EXPECT_EQ(second.known.delivery, OUTBOX_DELIVERY_ACKED);
  EXPECT_EQ(second.known.error, nullptr);
  for (const NewerOutcome* o : {&first, &second}) {
    EXPECT_EQ(o->added_later[0], 0);  // not read from the next outcome
    EXPECT_EQ(o->added_later[1], 0);
  }
}

}  // namespace
