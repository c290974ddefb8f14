// One batch of a replay (relay/replay.cpp): fetched through the partitions' seq indexes, sent
// with the header outbox-replay, and its outcomes turned into the replay's position.
#include <chrono>
#include <vector>

#include "relay/replay.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "pgstat.h"
}

namespace outbox::pg::relay {
namespace {

// Published, as every reader decides it (docs/design.md, "The delivery log"): marked on its
// row, or below the low-water mark and neither dead nor waiting for a retry, or in the log.
constexpr const char* kFetchSql = OUTBOX_FETCH_COLUMNS
    "  FROM outbox.events "
    " WHERE part_at >= $2 AND part_at < $3 AND seq > $4 AND seq <= $5 "
    "   AND dead_at IS NULL "
    "   AND (published_at IS NOT NULL "
    "        OR (next_attempt_at IS NULL "
    "            AND (seq < $10 OR outbox._delivered_at(seq) IS NOT NULL))) ";
// The filters, each added only when the replay has it: written as `$6 IS NULL OR ...`, a
// kept (generic) plan would test all four on every row.
constexpr const char* kFilterSql[4] = {" AND aggregatetype = $6", " AND type = $7",
                                       " AND aggregateid = $8", " AND id = ANY ($9)"};
constexpr const char* kFetchOrderSql = " ORDER BY seq LIMIT $1";
constexpr Oid kFetchTypes[10] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID,      INT8OID,
                                 TEXTOID, TEXTOID,        TEXTOID,        UUIDARRAYOID, INT8OID};

// Its batches write nothing, so they take no transaction id: the commit log's LSN of a group
// of transactions is the newest asynchronous commit's among them, and a commit per batch
// would make the relays flush the WAL for their writers' events (durability.cpp). The
// progress goes to the row once a second: after a crash, at most that is sent again.
constexpr int64 kSaveEveryUs = 1000 * 1000;

}  // namespace

int Replayer::send_batch(const Replay& replay) {
  const int count = fetch(replay);
  if (count == 0) {
    save(replay.id, Mark::kDone);
    commit_worker_transaction(iteration_);
    unsaved_ = Unsaved{};
    loop_.succeeded();
    return 0;
  }
  replay_id_ = std::to_string(replay.id);
  fill_messages(batch_);
  for (sinks::Message& m : batch_.messages) m.headers.emplace_back(kReplayHeader, replay_id_);
  report_.publish(WorkerState::kSending);
  guard([&] {
    pgstat_report_activity(STATE_RUNNING, psprintf("outbox replay %ld: sending %d events",
                                                   static_cast<long>(replay.id), count));
  });
  send();
  std::string error;
  const replay::Progress progress = progress_of(replay, error);
  // The messages are kept, their header vectors with their capacity: fill_messages() sets
  // every field before the next send, and nothing reads them in between.
  guard([&] { MemoryContextReset(batch_.memory); });
  unsaved_.position = progress.position;
  unsaved_.sent += progress.sent;
  unsaved_.skipped += progress.skipped;
  if (!error.empty()) unsaved_.error = error;
  const bool moved = progress.position != replay.position;
  const TimestampTz now = GetCurrentTimestamp();
  if (!moved || now - saved_at_ >= kSaveEveryUs) save(replay.id, Mark::kProgress);
  commit_worker_transaction(iteration_);
  // Nothing moved: the destination is down, or the batch's first event keeps failing.
  if (!moved) return loop_.back_off(error);
  loop_.succeeded();
  report_.publish(WorkerState::kIdle);
  return 0;
}

// The next events of `replay` after its position, into batch_; returns how many.
int Replayer::fetch(const Replay& replay) {
  const bool has[4] = {replay.has_aggregatetype, replay.has_type, replay.has_aggregateid,
                       replay.has_ids};
  int filters = 0;
  for (int i = 0; i < 4; ++i) filters |= has[i] ? 1 << i : 0;
  std::string sql;
  if (fetch_plans_[filters] == nullptr) {
    sql = kFetchSql;
    for (int i = 0; i < 4; ++i) sql += has[i] ? kFilterSql[i] : "";
    sql += kFetchOrderSql;
  }
  Fetched& out = batch_.fetched;
  guard([&] {
    if (fetch_plans_[filters] == nullptr) {
      fetch_plans_[filters] = prepare_kept(sql.c_str(), 10, kFetchTypes);
    }
    const int limit = settings.batch_size;
    MemoryContextReset(batch_.memory);
    out = Fetched{static_cast<Row*>(MemoryContextAllocZero(batch_.memory, sizeof(Row) * limit)), 0,
                  false, InvalidXLogRecPtr};
    const Datum values[10] = {Int64GetDatum(limit),
                              replay.since,
                              replay.until,
                              Int64GetDatum(replay.position),
                              Int64GetDatum(replay.upto_seq),
                              replay.aggregatetype,
                              replay.type,
                              replay.aggregateid,
                              replay.ids,
                              Int64GetDatum(replay.low_water)};
    const bool nulls[10] = {false,
                            false,
                            false,
                            false,
                            false,
                            !replay.has_aggregatetype,
                            !replay.has_type,
                            !replay.has_aggregateid,
                            !replay.has_ids,
                            false};
    RowReceiver receiver;
    init_row_receiver(receiver, batch_, &scratch_, limit, 0, settings.batch_max_bytes);
    run_into(fetch_plans_[filters], 10, values, nulls, kFetchTypes, receiver);
  });
  return out.count;
}

// The batch through the sink; a sink that throws leaves every message unavailable.
void Replayer::send() {
  batch_.outcomes.assign(batch_.fetched.count, sinks::Outcome{});
  try {
    session_.sink().send(batch_.messages, batch_.outcomes,
                         std::chrono::milliseconds(settings.send_timeout_ms));
  } catch (const std::exception& e) {
    for (auto& o : batch_.outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
  }
}

// The position moves over the events sent or refused in order (core/replay_progress.hpp); a
// refused one is skipped, its error kept.
replay::Progress Replayer::progress_of(const Replay& replay, std::string& error) {
  const int count = batch_.fetched.count;
  std::vector<replay::Outcome> outcomes(count);
  std::vector<int64> seqs(count);
  for (int i = 0; i < count; ++i) {
    const sinks::Outcome& o = batch_.outcomes[i];
    seqs[i] = batch_.fetched.rows[i].seq;
    outcomes[i] = o.delivery == sinks::Delivery::kAcked      ? replay::Outcome::kSent
                  : o.delivery == sinks::Delivery::kRejected ? replay::Outcome::kRefused
                                                             : replay::Outcome::kNotSent;
    if (o.delivery == sinks::Delivery::kRejected) error = "event rejected: " + o.error;
  }
  const replay::Progress progress =
      replay::advance(replay.position, seqs.data(), outcomes.data(), count);
  if (progress.first_not_sent >= 0 && error.empty()) {
    error = "sink unavailable: " + batch_.outcomes[progress.first_not_sent].error;
  }
  return progress;
}

}  // namespace outbox::pg::relay
