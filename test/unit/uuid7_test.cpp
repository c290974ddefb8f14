#include "core/uuid7.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace {

std::array<std::uint8_t, 10> random_bytes(std::mt19937& rng) {
  std::array<std::uint8_t, 10> out{};
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

TEST(Uuid7, VersionVariantAndTimestamp) {
  outbox::Uuid7Generator gen;
  std::mt19937 rng(1);
  const std::int64_t ms = 1796032677257;  // 2026-11-29
  outbox::Uuid id = gen.next(ms, random_bytes(rng));
  EXPECT_EQ(id[6] >> 4, 7) << "version 7";
  EXPECT_EQ(id[8] >> 6, 2) << "variant 10";
  EXPECT_EQ(outbox::uuid7_unix_ms(id), ms);
}

TEST(Uuid7, StrictlyIncreasingWithinOneMillisecond) {
  outbox::Uuid7Generator gen;
  std::mt19937 rng(2);
  outbox::Uuid prev = gen.next(1000, random_bytes(rng));
  // More ids than the 12-bit counter holds: the generator borrows the next millisecond.
  for (int i = 0; i < 10000; ++i) {
    outbox::Uuid id = gen.next(1000, random_bytes(rng));
    ASSERT_LT(prev, id) << "at " << i;
    prev = id;
  }
}

TEST(Uuid7, ClockSteppingBackStillIncreases) {
  outbox::Uuid7Generator gen;
  std::mt19937 rng(3);
  outbox::Uuid a = gen.next(5000, random_bytes(rng));
  outbox::Uuid b = gen.next(4000, random_bytes(rng));
  EXPECT_LT(a, b);
  EXPECT_EQ(outbox::uuid7_unix_ms(b), 5000);
}

TEST(Uuid7, NoCollisionsAcrossGenerators) {
  std::set<outbox::Uuid> seen;
  std::mt19937 rng(4);
  for (int g = 0; g < 8; ++g) {
    outbox::Uuid7Generator gen;
    for (int i = 0; i < 2000; ++i) {
      ASSERT_TRUE(seen.insert(gen.next(7000 + i / 100, random_bytes(rng))).second);
    }
  }
}

}  // namespace

TEST(UuidText, CanonicalLowercase) {
  const std::uint8_t bytes[16] = {0x01, 0x8f, 0x3a, 0xbc, 0xde, 0xf0, 0x7a, 0x12,
                                  0x80, 0x00, 0xff, 0xee, 0x0d, 0xc9, 0x55, 0xa0};
  char out[outbox::kUuidTextLen];
  outbox::uuid_text(bytes, out);
  EXPECT_EQ(std::string(out, sizeof out), "018f3abc-def0-7a12-8000-ffee0dc955a0");
}
