// Time-ordered UUIDs, version 7 (RFC 9562). Plain C++.
//
// Layout: 48 bits of Unix milliseconds, version 7, 12 bits of a per-generator counter
// (RFC 9562 section 6.2, method 1) so ids from one backend increase even within one
// millisecond, variant 10, 62 random bits. The id is set once at enqueue and never changes,
// so a replay carries the same id and consumers can deduplicate on it.
#pragma once

#include <array>
#include <cstdint>

namespace outbox {

using Uuid = std::array<std::uint8_t, 16>;

class Uuid7Generator {
 public:
  // unix_ms: wall clock in milliseconds. random: 10 bytes of fresh randomness.
  Uuid next(std::int64_t unix_ms, const std::array<std::uint8_t, 10>& random);

 private:
  std::int64_t last_ms_ = -1;
  std::uint16_t counter_ = 0;  // 12 bits used
};

// Milliseconds encoded in a version 7 UUID.
std::int64_t uuid7_unix_ms(const Uuid& id);

// The canonical text of any UUID (what PostgreSQL's uuid::text gives): 36 lowercase
// characters, 8-4-4-4-12, not NUL-terminated.
constexpr int kUuidTextLen = 36;
void uuid_text(const std::uint8_t (&bytes)[16], char (&out)[kUuidTextLen]);

}  // namespace outbox
