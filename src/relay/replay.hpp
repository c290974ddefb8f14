// The replay worker: a lane of its own beside a database's relays, started by the launcher
// while a replay (outbox.replays) runs there, that sends the published events of the
// replay's window again (docs/design.md, "Replay").
#pragma once

#include <ctime>
#include <string>

#include "core/replay_progress.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"
#include "relay/session.hpp"
#include "relay/worker_loop.hpp"

namespace outbox::pg::relay {

// The header every replayed message carries: the replay's id.
constexpr const char* kReplayHeader = "outbox-replay";

class Replayer {
 public:
  // `slot`: its shared-memory slot; `worker`: its number in the database (outbox.workers).
  Replayer(int slot, int worker);
  // Until no replay runs in the database any more, or a shutdown.
  void run();

 private:
  // The running replay with the lowest id, as its row says.
  struct Replay {
    int64 id;
    Datum since, until;  // timestamptz
    Datum aggregatetype, type, aggregateid, ids;
    bool has_aggregatetype, has_type, has_aggregateid, has_ids;
    int64 position, upto_seq, low_water;
  };
  // One batch of the oldest running replay; returns how long to wait before the next step,
  // or -1 when no replay runs.
  int step();
  bool load(Replay& replay);
  // One batch of `replay` (replay_batch.cpp), in the step's transaction, which it commits.
  int send_batch(const Replay& replay);
  int fetch(const Replay& replay);
  void send();
  // The batch's outcomes: the position they move to, and the error that held it.
  replay::Progress progress_of(const Replay& replay, std::string& error);
  enum class Mark { kProgress, kDone };
  void save(int64 id, Mark mark);
  void save_at_exit();
  // After a batch begun at `cpu_started` (process CPU time): the wait that keeps it to
  // outbox.replay_share.
  int share_wait(std::clock_t cpu_started);

  const int slot_;
  MemoryContext iteration_ = nullptr;
  Report report_;
  Batch batch_;  // before the session: the sink may still read its messages
  SinkSession session_{report_};
  WorkerLoop loop_{Role::kReplay, report_, session_};
  SPIPlanPtr fetch_plans_[16] = {};  // by the filters the replay has (send_batch())
  // The current replay's progress since its row was last written (Replayer::save()).
  struct Unsaved {
    int64 id = 0;
    int64 position = 0;
    int64 sent = 0, skipped = 0;
    std::string error;
  };
  Unsaved unsaved_;
  TimestampTz saved_at_ = 0;
  StringInfoData scratch_{};
  std::string replay_id_;         // the header's value, while a batch is out
  uint64 live_batches_ = 0;       // the relays' batches at the last look
  TimestampTz live_seen_at_ = 0;  // when they last moved
};

// A relay at its start: a replay left running (by a restart) wants the replay worker again.
void request_replay_worker_if_running(MemoryContext resume);

}  // namespace outbox::pg::relay
