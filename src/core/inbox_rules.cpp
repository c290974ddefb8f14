#include "core/inbox_rules.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace outbox {

bool is_uuid7(const Uuid& id) { return (id[6] >> 4) == 7 && (id[8] >> 6) == 2; }

std::int64_t inbox_event_unix_us(const Uuid* id, std::optional<std::int64_t> given_unix_us) {
  constexpr const char* kFunction = "outbox.inbox_receive";
  if (id == nullptr) {
    throw Error(sqlstate::kNullValueNotAllowed, std::string(kFunction) + ": event_id is NULL");
  }
  if (std::all_of(id->begin(), id->end(), [](std::uint8_t b) { return b == 0; })) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(kFunction) + ": event_id is the nil UUID");
  }
  if (is_uuid7(*id)) return uuid7_unix_ms(*id) * 1000;
  if (!given_unix_us) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(kFunction) + ": event_id is not a UUIDv7, and no event_time is given",
                "The inbox files a record by the event's time, which a UUIDv7 carries.",
                "Pass the event's own time as event_time (its created_at, the CloudEvents "
                "time attribute), the same for every copy of the event.");
  }
  return *given_unix_us;
}

void check_consumer_name(std::string_view function, std::string_view name) {
  const auto control = [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b < 0x20 || b == 0x7f;
  };
  std::string problem;
  if (std::any_of(name.begin(), name.end(), control)) {
    problem = "a control character";
  } else if (!name.empty() && (name.front() == ' ' || name.back() == ' ')) {
    problem = "a space at its start or end";
  } else {
    return;
  }
  throw Error(sqlstate::kInvalidParameterValue,
              std::string(function) + ": the consumer name has " + problem,
              "A consumer name is compared byte for byte, as a quoted identifier is: "
              "\"billing\", \"billing \" and \"Billing\" would be three consumers.",
              "Name the consumer with printable characters and no space at either end.");
}

}  // namespace outbox
