// Cumulative statistics of the relay, in shared memory (docs/monitoring.md): per database
// and sink, what the relays sent and how long it took; per database, the relays' starts and
// exits and the events requeued. They never go backwards while the server runs, relays
// restarting included, and start again from zero when the server starts (or reinitialises
// after a crash), as PostgreSQL's own statistics do without a clean shutdown. Counted per
// transaction of the relay, after its COMMIT: a batch whose transaction aborted is sent
// again and counted then.
#pragma once

#include "core/histogram.hpp"
#include "pg/postgres.hpp"

namespace outbox::pg {

// One transaction's worth, added at once.
struct RelayStatsDelta {
  uint64 events_sent = 0;         // acknowledged
  uint64 events_failed = 0;       // unavailable while others were acknowledged (transient)
  uint64 events_rejected = 0;     // rejected by the sink (an attempt used)
  uint64 events_dead = 0;         // of them, dead-lettered
  uint64 batches = 0;             // handed to the sink
  uint64 bytes_sent = 0;          // payload and header bytes of the acknowledged events
  uint64 backoffs = 0;            // back-offs of the whole stream
  histogram::Seconds latency;     // per acknowledged event: enqueue -> acknowledgement
  histogram::Seconds round_trip;  // per batch: handed to the sink -> its outcomes
  histogram::Sizes batch_size;    // per batch: events handed to the sink
};

enum class RelayExit { kClean, kError, kLost };
constexpr int kRelayExitKinds = 3;
constexpr int kSinkNameBytes = 64;

struct SinkStatsView {
  char sink[kSinkNameBytes];
  RelayStatsDelta totals;
};

struct DatabaseStatsView {
  uint64 relay_starts;
  uint64 relay_exits[kRelayExitKinds];  // by RelayExit
  uint64 events_requeued;
};

// From pg/shmem_hooks.cpp.
Size relay_stats_size();
void relay_stats_init();
// Registers the transaction callback that counts requeued events at commit.
void relay_stats_register_xact_callback();

// Relay side. `sink`: the configured sink's name.
void relay_stats_add(Oid database, const char* sink, const RelayStatsDelta& delta);
void relay_stats_started(Oid database);
void relay_stats_exited(Oid database, RelayExit why);
// Backend side (outbox.requeue, outbox.requeue_dead): counted if the transaction commits.
void relay_stats_requeued(int64 events);
// Launcher side: the database is gone.
void relay_stats_forget(Oid database);

// Reader side: the database's sinks, at most `max`; returns how many.
int relay_stats_sinks(Oid database, SinkStatsView* out, int max);
DatabaseStatsView relay_stats_database(Oid database);

}  // namespace outbox::pg
