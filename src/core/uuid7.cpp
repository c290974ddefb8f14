#include "core/uuid7.hpp"

namespace outbox {

Uuid Uuid7Generator::next(std::int64_t unix_ms, const std::array<std::uint8_t, 10>& random) {
  if (unix_ms > last_ms_) {
    last_ms_ = unix_ms;
    // Start the counter in the lower half of its range so that it rarely overflows, and
    // randomly, so that two generators in the same millisecond rarely agree.
    counter_ = static_cast<std::uint16_t>(((random[0] << 8) | random[1]) & 0x07FF);
  } else if (counter_ < 0x0FFF) {
    // Same millisecond, or the clock stepped back: keep increasing.
    ++counter_;
  } else {
    // Counter exhausted: borrow the next millisecond rather than repeat an id.
    ++last_ms_;
    counter_ = 0;
  }

  Uuid id{};
  const auto ms = static_cast<std::uint64_t>(last_ms_);
  for (int i = 0; i < 6; ++i) {
    id[i] = static_cast<std::uint8_t>(ms >> (40 - 8 * i));
  }
  id[6] = static_cast<std::uint8_t>(0x70 | ((counter_ >> 8) & 0x0F));
  id[7] = static_cast<std::uint8_t>(counter_ & 0xFF);
  id[8] = static_cast<std::uint8_t>(0x80 | (random[2] & 0x3F));
  for (int i = 9; i < 16; ++i) {
    id[i] = random[i - 6];
  }
  return id;
}

std::int64_t uuid7_unix_ms(const Uuid& id) {
  std::uint64_t ms = 0;
  for (int i = 0; i < 6; ++i) {
    ms = (ms << 8) | id[i];
  }
  return static_cast<std::int64_t>(ms);
}

void uuid_text(const std::uint8_t (&bytes)[16], char (&out)[kUuidTextLen]) {
  static constexpr char kHex[] = "0123456789abcdef";
  int at = 0;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[at++] = '-';
    out[at++] = kHex[bytes[i] >> 4];
    out[at++] = kHex[bytes[i] & 0x0F];
  }
}

}  // namespace outbox
