#include "pg/relay_stats.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
}

namespace outbox::pg {
namespace {

using histogram::Seconds;
using histogram::Sizes;

// An entry's values, all counters: a sink's, or (sink "") the database's own.
enum Value : int {
  kSent,
  kFailed,
  kRejected,
  kDead,
  kBatches,
  kBytes,
  kBackoffs,
  kLatency,                                       // Seconds::kBuckets, then the sum
  kRoundTrip = kLatency + Seconds::kBuckets + 1,  // the same
  kBatchSize = kRoundTrip + Seconds::kBuckets + 1,
  kValues = kBatchSize + Sizes::kBuckets + 1,
  // The database's entry.
  kStarts = 0,
  kExits = 1,  // kRelayExitKinds of them
  kRequeued = kExits + kRelayExitKinds,
};

// Two per database with a sink (its own and the sink's), more after a change of sink.
constexpr int kEntries = 1024;

// Lock-free reads and adds: an entry's database is written last when it is taken and first
// when it is given back.
struct Entry {
  pg_atomic_uint32 database;  // InvalidOid: free
  char sink[kSinkNameBytes];
  pg_atomic_uint64 values[kValues];
};

struct Shared {
  slock_t lock;  // taking and giving back entries
  Entry entries[kEntries];
};

Shared* shared = nullptr;
int last_found = 0;
int64 requeued_pending = 0;  // this backend's transaction

bool matches(Entry& e, Oid database, const char* sink) {
  return pg_atomic_read_u32(&e.database) == database && strcmp(e.sink, sink) == 0;
}

Entry* find_or_add(Oid database, const char* sink) {
  if (shared == nullptr || !OidIsValid(database)) return nullptr;
  if (matches(shared->entries[last_found], database, sink)) return &shared->entries[last_found];
  for (int i = 0; i < kEntries; ++i) {
    if (matches(shared->entries[i], database, sink)) {
      last_found = i;
      return &shared->entries[i];
    }
  }
  Entry* entry = nullptr;
  SpinLockAcquire(&shared->lock);
  for (int i = 0; i < kEntries && entry == nullptr; ++i) {
    if (matches(shared->entries[i], database, sink)) entry = &shared->entries[i];
  }
  for (int i = 0; i < kEntries && entry == nullptr; ++i) {
    Entry& e = shared->entries[i];
    if (pg_atomic_read_u32(&e.database) != InvalidOid) continue;
    strlcpy(e.sink, sink, sizeof(e.sink));
    for (pg_atomic_uint64& v : e.values) pg_atomic_write_u64(&v, 0);
    pg_write_barrier();
    pg_atomic_write_u32(&e.database, database);
    entry = &e;
  }
  SpinLockRelease(&shared->lock);
  return entry;  // null when every entry is taken: not counted
}

void add(Entry* e, int value, uint64 n) {
  if (n != 0) pg_atomic_fetch_add_u64(&e->values[value], n);
}

template <typename Tally>
void add_tally(Entry* e, int first, const Tally& t) {
  for (int i = 0; i < Tally::kBuckets; ++i) add(e, first + i, t.counts[i]);
  add(e, first + Tally::kBuckets, t.sum);
}

template <typename Tally>
void read_tally(Entry& e, int first, Tally& t) {
  for (int i = 0; i < Tally::kBuckets; ++i) t.counts[i] = pg_atomic_read_u64(&e.values[first + i]);
  t.sum = pg_atomic_read_u64(&e.values[first + Tally::kBuckets]);
}

void xact_callback(XactEvent event, void*) {
  if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT) {
    if (requeued_pending > 0) {
      if (Entry* e = find_or_add(MyDatabaseId, "")) add(e, kRequeued, requeued_pending);
    }
    requeued_pending = 0;
  } else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
             event == XACT_EVENT_PREPARE) {
    requeued_pending = 0;
  }
}

}  // namespace

Size relay_stats_size() { return MAXALIGN(sizeof(Shared)); }

void relay_stats_init() {
  bool found = false;
  shared = static_cast<Shared*>(ShmemInitStruct("outbox relay stats", sizeof(Shared), &found));
  if (found) return;
  memset(shared, 0, sizeof(Shared));
  SpinLockInit(&shared->lock);
}

void relay_stats_register_xact_callback() { RegisterXactCallback(xact_callback, nullptr); }

void relay_stats_add(Oid database, const char* sink, const RelayStatsDelta& d) {
  if (sink == nullptr || sink[0] == '\0') return;  // "" is the database's own entry
  Entry* e = find_or_add(database, sink);
  if (e == nullptr) return;
  add(e, kSent, d.events_sent);
  add(e, kFailed, d.events_failed);
  add(e, kRejected, d.events_rejected);
  add(e, kDead, d.events_dead);
  add(e, kBatches, d.batches);
  add(e, kBytes, d.bytes_sent);
  add(e, kBackoffs, d.backoffs);
  add_tally(e, kLatency, d.latency);
  add_tally(e, kRoundTrip, d.round_trip);
  add_tally(e, kBatchSize, d.batch_size);
}

void relay_stats_started(Oid database) {
  if (Entry* e = find_or_add(database, "")) add(e, kStarts, 1);
}

void relay_stats_exited(Oid database, RelayExit why) {
  if (Entry* e = find_or_add(database, "")) add(e, kExits + static_cast<int>(why), 1);
}

void relay_stats_requeued(int64 events) { requeued_pending += events; }

void relay_stats_forget(Oid database) {
  if (shared == nullptr) return;
  SpinLockAcquire(&shared->lock);
  for (Entry& e : shared->entries) {
    if (pg_atomic_read_u32(&e.database) == database) pg_atomic_write_u32(&e.database, InvalidOid);
  }
  SpinLockRelease(&shared->lock);
}

int relay_stats_sinks(Oid database, SinkStatsView* out, int max) {
  int n = 0;
  for (int i = 0; shared != nullptr && i < kEntries && n < max; ++i) {
    Entry& e = shared->entries[i];
    if (pg_atomic_read_u32(&e.database) != database || e.sink[0] == '\0') continue;
    SinkStatsView& v = out[n];
    strlcpy(v.sink, e.sink, sizeof(v.sink));
    RelayStatsDelta& t = v.totals;
    t.events_sent = pg_atomic_read_u64(&e.values[kSent]);
    t.events_failed = pg_atomic_read_u64(&e.values[kFailed]);
    t.events_rejected = pg_atomic_read_u64(&e.values[kRejected]);
    t.events_dead = pg_atomic_read_u64(&e.values[kDead]);
    t.batches = pg_atomic_read_u64(&e.values[kBatches]);
    t.bytes_sent = pg_atomic_read_u64(&e.values[kBytes]);
    t.backoffs = pg_atomic_read_u64(&e.values[kBackoffs]);
    read_tally(e, kLatency, t.latency);
    read_tally(e, kRoundTrip, t.round_trip);
    read_tally(e, kBatchSize, t.batch_size);
    pg_read_barrier();
    if (pg_atomic_read_u32(&e.database) == database) ++n;  // not given back meanwhile
  }
  return n;
}

DatabaseStatsView relay_stats_database(Oid database) {
  DatabaseStatsView v{};
  for (int i = 0; shared != nullptr && i < kEntries; ++i) {
    Entry& e = shared->entries[i];
    if (!matches(e, database, "")) continue;
    v.relay_starts = pg_atomic_read_u64(&e.values[kStarts]);
    for (int k = 0; k < kRelayExitKinds; ++k) {
      v.relay_exits[k] = pg_atomic_read_u64(&e.values[kExits + k]);
    }
    v.events_requeued = pg_atomic_read_u64(&e.values[kRequeued]);
    break;
  }
  return v;
}

}  // namespace outbox::pg
