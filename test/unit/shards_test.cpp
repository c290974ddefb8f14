#include "core/shards.hpp"

#include <gtest/gtest.h>

#include <set>

namespace {

using namespace outbox::shards;

TEST(Shards, PreferredSetsPartitionTheShards) {
  for (int workers = 1; workers <= 32; ++workers) {
    Mask all = 0;
    for (int w = 0; w < workers; ++w) {
      const Mask mine = preferred(w, workers);
      EXPECT_EQ(all & mine, 0u) << workers;  // disjoint
      all |= mine;
      EXPECT_GE(count(mine), kShards / workers);
      EXPECT_LE(count(mine), kShards / workers + 1);
      for (int s = 0; s < kShards; ++s) {
        EXPECT_EQ((mine >> s) & 1, preferred_owner(s, workers) == w ? 1u : 0u);
      }
    }
    EXPECT_EQ(all, kAll) << workers;
  }
  EXPECT_EQ(preferred(0, 1), kAll);
  EXPECT_EQ(preferred(3, 2), 0u);
}

TEST(Shards, RoundClaimsPreferredAndOrphansReleasesForOwnersThatRun) {
  const auto everyone = [](int) { return true; };
  // Nothing held: claim the preferred shards only.
  Round r = plan_round(1, 4, 0, everyone);
  EXPECT_EQ(r.claim, preferred(1, 4));
  EXPECT_EQ(r.release, 0u);
  // Holding worker 2's shards while it runs: give them back.
  r = plan_round(1, 4, preferred(1, 4) | preferred(2, 4), everyone);
  EXPECT_EQ(r.claim, 0u);
  EXPECT_EQ(r.release, preferred(2, 4));
  // Worker 3 does not run: claim its shards too, and keep them while it does not.
  const auto no3 = [](int w) { return w != 3; };
  r = plan_round(1, 4, preferred(1, 4), no3);
  EXPECT_EQ(r.claim, preferred(3, 4));
  r = plan_round(1, 4, preferred(1, 4) | preferred(3, 4), no3);
  EXPECT_EQ(r.claim, 0u);
  EXPECT_EQ(r.release, 0u);
}

TEST(Shards, Predicate) {
  EXPECT_EQ(predicate(kAll), "");
  EXPECT_EQ(array_literal(0), "{}");
  EXPECT_EQ(array_literal(preferred(1, 16)), "{1,17,33,49}");
  EXPECT_EQ(predicate(0b101),
            " AND outbox.shard_of(aggregatetype, aggregateid) OPERATOR(pg_catalog.=) ANY "
            "('{0,2}'::pg_catalog.int4[])");
}

}  // namespace
