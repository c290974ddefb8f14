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

}  // namespace outbox
