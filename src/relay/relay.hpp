// The relay's internal header: its parts and what they hand each other. A relay is a
// background worker that sends unpublished events through the configured sink and marks
// them published once the sink has acknowledged them (docs/design.md, "The relay").
//
//   loop.cpp          the relay's loop: when a pass runs, what it waits for between passes
//   worker_loop.cpp   the loop it shares with the replay worker: back-off, the wait
//   worker_main.cpp   outbox_relay_main and outbox_replay_main: the worker process's setup
//   idle.cpp          an idle pass skipped: no commit since the last, nothing due
//   pipeline.cpp      one pass's transaction: fetch, durability, send, mark, pipelined
//   queue.cpp         the queries on outbox.events: fetch into a batch, mark acknowledged and
//                     rejected events (retries, dead letters)
//   holds.cpp         failed events (rejected, transient) and the keys they hold back
//   late_keys.cpp     late commits: no newer event of their keys goes out before them
//   rows.cpp          a fetched row's values, copied into its batch by the executor
//   ownership.cpp     the shards this relay owns, claimed and given back
//   low_water.cpp     the low-water mark, its horizon, the gaps and their probes
//   tracking.cpp      what fetches accounted for above the mark: the resume point, the gaps
//   delivered.cpp     the delivery log's seqs from the mark up, read when tracking restarts
//   seal.cpp          sealed partitions: past, resolved, unwritable; no query reads them.
//                     The relay drives the sealer with the floor the mark reports
//   sink_session.cpp  the configured sink: created, created again, observed, its log
//   report.cpp        state and counters in shared memory, for outbox.status
//   launcher.cpp      the launcher: starts the workers in outbox.database
//   database_entries.cpp  the databases it knows, and which have an entry (max_databases)
//   shard_locks.cpp   the shards' advisory locks
//   durability.cpp    a batch's commits made durable before it is sent
//   spi.cpp           kept plans, int8[] parameters, a worker's own transactions
//   replay.cpp        the replay worker: a replay's events sent again, beside the relays
//
// One header per class: queue.hpp, low_water.hpp, seal.hpp, ownership.hpp, session.hpp
// (Report, SinkSession), and here Relay; batch.hpp holds the plain data they hand each other
// (a fetch's request and report, rows, batches, results).
//
// A crash anywhere before a pass's COMMIT releases its rows and they are sent again: at
// least once. The relay commits or aborts before it waits or backs off.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/pacing.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"
#include "relay/low_water.hpp"
#include "relay/queue.hpp"
#include "relay/seal.hpp"
#include "relay/session.hpp"
#include "relay/worker_loop.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::pg::relay {

// loop.cpp and pipeline.cpp: the worker.
class Relay {
 public:
  // `slot`: its shared-memory slot; `worker`: its number in its database, from 0.
  Relay(int slot, int worker);
  void run();

 private:
  // What a pass asks the loop to wait for. Every wait ends at its timeout, at a signal
  // (reload, shutdown) and at a new sink configuration.
  struct Pause {
    enum Kind {
      kForEvents,   // and for a commit that enqueued: the next pass sends its events
      kForSink,     // nothing to send with: commits that enqueue do not wake the relay
      kGathering,   // commits gather for the next batch (core/pacing.hpp): they do not wake it
      kBackingOff,  // after a failure: commits do not wake it, the back-off's end does
    } kind;
    int ms;
  };

  // loop.cpp
  Pause step();
  std::optional<Pause> before_pass(TimestampTz& now);
  Pause after_pass(const BatchResult& result);
  int until_due();
  void succeeded();
  // WorkerLoop::back_off(), tracking restarted from the mark.
  int back_off(const std::string& error, bool at_max = false);
  void wait(Pause pause);
  void wake_on_commit(bool wake);
  // idle.cpp
  std::optional<Pause> idle_pause(TimestampTz now, uint32& commits, bool& known);
  void start_pass(TimestampTz now, uint32 commits, bool known);
  void note_pass(const BatchResult& result);
  void set_idle(bool idle);
  // pipeline.cpp
  BatchResult run_transaction();
  // The extension is gone or was created again: the mark is read again, nothing is sealed.
  void forget_extension();
  void fetch(Batch& batch, bool first_of_transaction);
  void start_batch(Batch& batch);
  void finish_batch(Batch& batch, BatchResult& result);
  void count_batch(const Batch& batch, RelayStatsDelta& stats);
  void fail_batch(Batch& batch, const std::exception& e);
  bool make_durable(const Fetched& fetched);
  void abort_transaction();

  const int slot_;
  MemoryContext iteration_ = nullptr;
  // What the relay's shared-memory slot says: commits that enqueue set its latch.
  bool wake_on_commit_ = true;
  Report report_;
  // Before the session: a batch's messages outlive the sink that may still read them.
  Batch batches_[2];
  SinkSession session_{report_};
  WorkerLoop loop_{Role::kRelay, report_, session_};
  Ownership ownership_;
  // Seals below the floor the mark reports (Relay::fetch); the mark's queries read it.
  Sealer sealer_;
  LowWater mark_{ownership_, sealer_};
  Queue queue_;
  // Worker 1 looked for a replay left running, once the sink was ready.
  bool replays_checked_ = false;
  pacing::BatchPacer pacer_;
  // Idle passes (idle.cpp): what the last pass that ran started from (the database's commit
  // count, the reloads, the time), and whether it found nothing.
  bool commits_known_ = false;
  uint32 commits_ = 0;
  uint32 reloads_ = 0;
  TimestampTz pass_at_ = 0;
  bool quiet_ = false;
  // What the relay's shared-memory slot says: it may sleep past poll_interval.
  bool idle_ = false;
};

}  // namespace outbox::pg::relay
