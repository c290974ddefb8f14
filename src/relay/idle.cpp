// An idle relay runs no transaction (docs/design.md, "Idle relays"). Every commit that wrote
// events through outbox's functions (enqueue, enqueue_batch, requeue, requeue_dead, a COMMIT
// PREPARED) or changed the configuration moves its database's commit count once it is
// visible, and before it sets the relays' latches (pg/commit_wake.cpp). The relay reads the
// count before each pass's snapshot, so a commit that pass did not count is visible to it.
// When the count has not moved since the last pass that ran, and that pass found nothing,
// the next one would find what it found: it is skipped unless something is due that does
// not come from a commit:
//   - a retry of this relay's shards (Queue::retries_idle: it alone schedules them);
//   - the mark's work: a move past the horizon, gaps to probe, a save (LowWater::idle_due);
//   - a sealing round, or the end of a partition's range (Sealer::idle_due);
//   - an ownership round: a worker started or stopped (Ownership::round_wanted);
//   - a reload (the settings a pass reads may have changed);
//   - outbox.idle_check_interval since the last pass: what no count tells of, rows written
//     by other means (a plain INSERT or COPY into outbox.events, a restore), the audit of
//     the sealed partitions.
// A new sink configuration, the extension dropped or created again move the count too. The
// relay sleeps until the first of these is due, past outbox.poll_interval: the commits of
// its shards set its latch as before, and while it is idle any commit that wrote events in
// its database does, with outbox.wake_at_commit off too (pg/relay_slots.hpp).
#include <algorithm>

#include "relay/relay.hpp"

#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"

namespace outbox::pg::relay {

// With the commit wake-up on, before a pass or after a quiet one: the wait, when the pass can
// be skipped; else the commit count read (`commits`, `known`) for the pass that runs.
std::optional<Relay::Pause> Relay::idle_pause(TimestampTz now, uint32& commits, bool& known) {
  // Published before the count is read: a commit that this read misses sees it, and sets
  // the latch of the relay that sleeps past poll_interval.
  set_idle(quiet_ && commits_known_ && settings.idle_check_interval_ms > 0);
  commits = 0;
  known = relay_database_commits(MyDatabaseId, commits);
  const bool same = idle_ && known && commits == commits_ && loop_.reloads() == reloads_;
  if (!same || ownership_.round_wanted() || !queue_.retries_idle()) return std::nullopt;
  const TimestampTz check_at =
      pass_at_ + static_cast<int64>(settings.idle_check_interval_ms) * 1000;
  const TimestampTz due =
      std::min({check_at, mark_.idle_due(ownership_.owned() != 0), sealer_.idle_due()});
  if (due <= now) return std::nullopt;
  // Until then only a latch wakes it: a commit, a new configuration, a reload, a worker that
  // started or stopped, a shutdown. A wake-up alone costs a few hundred microseconds of CPU
  // on a virtual machine, most of what an empty pass costs.
  const int64 wait_ms = std::min<int64>((due - now) / 1000 + 1, 3600 * 1000);
  return Pause{Pause::kForEvents, static_cast<int>(wait_ms)};
}

// The pass runs: what it starts from.
void Relay::start_pass(TimestampTz now, uint32 commits, bool known) {
  set_idle(false);
  commits_known_ = known;
  commits_ = commits;
  reloads_ = loop_.reloads();
  pass_at_ = now;
  quiet_ = false;
}

void Relay::set_idle(bool idle) {
  if (idle == idle_) return;
  relay_worker_idle(slot_, idle);
  idle_ = idle;
}

// After a pass that went through: quiet when it found nothing to send and left nothing to
// resolve (a full batch, a failure, a deferred event run the next pass anyway).
void Relay::note_pass(const BatchResult& result) {
  quiet_ = result.fetched == 0 && result.unavailable == 0 && !result.abandoned &&
           !result.unresolved && result.deferred == 0 && !result.full;
}

}  // namespace outbox::pg::relay
