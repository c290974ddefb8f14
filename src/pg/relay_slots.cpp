#include "pg/relay_slots.hpp"

#include <signal.h>

#include "pg/relay_stats.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
}

namespace outbox::pg {
namespace {

struct Slot {
  slock_t mutex;
  Oid database;  // the launcher's assignment
  int worker;
  bool in_use;
  bool error_exit;      // its last relay stopped after an error
  PGPROC* proc;         // the worker's PGPROC: its procLatch is what we set
  pid_t pid;            // the worker's, from attach to detach: what the stop signals
  bool wake_on_commit;  // commits that only enqueued set the latch
  uint64 wake_shards;   // ... if they enqueued in one of these shards
  bool idle;            // idle (relay/idle.cpp): any commit that wrote events sets the latch
  WorkerCounters counters;
  TimestampTz restart_at;
  char detail[256];
};

struct RelayShared {
  int slots;
  Slot slot[kMaxRelaySlots];
};

RelayShared* shared = nullptr;
constexpr uint64 kAllShards = ~uint64{0};

// A worker started or stopped: the other relays of its database run an ownership round
// (an idle one would otherwise sleep until its next check).
void wake_database(int index) {
  const Oid database = shared->slot[index].database;
  for (int i = 0; i < shared->slots; ++i) {
    if (i == index) continue;
    Slot& slot = shared->slot[i];
    SpinLockAcquire(&slot.mutex);
    Latch* latch = slot.in_use && slot.database == database ? &slot.proc->procLatch : nullptr;
    SpinLockRelease(&slot.mutex);
    if (latch != nullptr) SetLatch(latch);
  }
}

}  // namespace

const char* worker_state_name(WorkerState state) {
  switch (state) {
    case WorkerState::kStarting:
      return "starting";
    case WorkerState::kIdle:
      return "idle";
    case WorkerState::kSending:
      return "sending";
    case WorkerState::kBackoff:
      return "backoff";
    case WorkerState::kUnconfigured:
      return "unconfigured";
    case WorkerState::kWaitingForUpdate:
      return "waiting for ALTER EXTENSION UPDATE";
    case WorkerState::kWaitingForStandbys:
      return "waiting for synchronous standbys";
    case WorkerState::kStopped:
      return "stopped";
  }
  return "unknown";
}

bool relay_shmem_available() { return shared != nullptr; }

Size relay_slots_size() { return MAXALIGN(sizeof(RelayShared)); }

// Under AddinShmemInitLock (pg/shmem_hooks.cpp).
void relay_slots_init(int slots) {
  bool found = false;
  shared = static_cast<RelayShared*>(ShmemInitStruct("outbox relay", sizeof(RelayShared), &found));
  if (!found) {
    memset(shared, 0, sizeof(RelayShared));
    shared->slots = slots;
    for (Slot& slot : shared->slot) SpinLockInit(&slot.mutex);
  }
}

void relay_worker_attach(int index) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = true;
  slot.error_exit = false;
  slot.proc = MyProc;
  slot.pid = MyProcPid;
  slot.wake_on_commit = true;
  slot.wake_shards = kAllShards;
  slot.idle = false;
  // The counters go on from the last relay's (they start again only when the launcher
  // gives the slot to another database's worker).
  slot.counters.pid = MyProcPid;
  slot.counters.backoff_until = 0;
  slot.counters.state = WorkerState::kStarting;
  slot.restart_at = 0;
  slot.detail[0] = '\0';
  SpinLockRelease(&slot.mutex);
  wake_database(index);
}

void relay_worker_detach(int index, const char* why) {
  const TimestampTz now = GetCurrentTimestamp();
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = false;
  slot.error_exit = why != nullptr;
  slot.proc = nullptr;
  slot.pid = 0;
  slot.counters.state = WorkerState::kStopped;
  if (why != nullptr) {
    strlcpy(slot.counters.last_error, why, sizeof(slot.counters.last_error));
    slot.counters.last_error_at = now;
  }
  SpinLockRelease(&slot.mutex);
  wake_database(index);
}

void relay_worker_idle(int index, bool idle) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.idle = idle;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_wake_on_commit(int index, bool wake) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.wake_on_commit = wake;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_wake_shards(int index, uint64 shards) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.wake_shards = shards;
  SpinLockRelease(&slot.mutex);
}

bool relay_slot_in_use(int index) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  const bool in_use = slot.in_use;
  SpinLockRelease(&slot.mutex);
  return in_use;
}

bool relay_slot_stopped(int index) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  const bool lost = slot.in_use;
  const Oid database = slot.database;
  if (slot.in_use) {
    slot.in_use = false;
    slot.error_exit = true;
    slot.proc = nullptr;
    slot.pid = 0;
    slot.counters.state = WorkerState::kStopped;
  }
  const bool failed = slot.error_exit;
  SpinLockRelease(&slot.mutex);
  if (lost) relay_stats_exited(database, RelayExit::kLost);
  return failed;
}

void relay_slot_explain(int index, const char* detail, TimestampTz restart_at) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  strlcpy(slot.detail, detail, sizeof(slot.detail));
  slot.restart_at = restart_at;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_publish(int index, const WorkerCounters& counters) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  slot.counters = counters;
  SpinLockRelease(&slot.mutex);
}

SlotView relay_slot_read(int index) {
  SlotView out;
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  out.database = slot.database;
  out.worker = slot.worker;
  out.in_use = slot.in_use;
  out.counters = slot.counters;
  out.restart_at = slot.restart_at;
  memcpy(out.detail, slot.detail, sizeof(out.detail));
  SpinLockRelease(&slot.mutex);
  return out;
}

// Under the slot's spinlock, with the database and whether a relay runs: a relay's attach
// and its wake-up settings are seen whole.
SlotWake relay_slot_wake(int index) {
  SlotWake out;
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  out.database = slot.database;
  out.wake_on_commit = slot.wake_on_commit;
  out.wake_shards = slot.wake_shards;
  out.idle = slot.idle;
  out.latch = slot.in_use ? &slot.proc->procLatch : nullptr;
  SpinLockRelease(&slot.mutex);
  return out;
}

int relay_slot_count() { return shared == nullptr ? 0 : shared->slots; }

void relay_slot_assign(int index, Oid database, int worker) {
  Slot& slot = shared->slot[index];
  SpinLockAcquire(&slot.mutex);
  const bool same = slot.database == database && slot.worker == worker;
  slot.database = database;
  slot.worker = worker;
  if (!same && !slot.in_use) {
    memset(&slot.counters, 0, sizeof(slot.counters));
    slot.detail[0] = '\0';
    slot.restart_at = 0;
  }
  SpinLockRelease(&slot.mutex);
}

uint64 relay_database_batches(Oid database) {
  uint64 batches = 0;
  for (int i = 0; i < relay_slot_count(); ++i) {
    Slot& slot = shared->slot[i];
    SpinLockAcquire(&slot.mutex);
    if (slot.database == database) batches += slot.counters.batches;
    SpinLockRelease(&slot.mutex);
  }
  return batches;
}

bool relay_worker_running(Oid database, int worker) {
  for (int i = 0; i < relay_slot_count(); ++i) {
    Slot& slot = shared->slot[i];
    SpinLockAcquire(&slot.mutex);
    const bool running = slot.in_use && slot.database == database && slot.worker == worker;
    SpinLockRelease(&slot.mutex);
    if (running) return true;
  }
  return false;
}

void relay_stop_database(Oid database) {
  for (int i = 0; i < relay_slot_count(); ++i) {
    Slot& slot = shared->slot[i];
    SpinLockAcquire(&slot.mutex);
    // The pid of attach, not the published counters': a worker's publish must not hide it.
    const pid_t pid = slot.in_use && slot.database == database ? slot.pid : 0;
    SpinLockRelease(&slot.mutex);
    if (pid != 0) (void)kill(pid, SIGTERM);
  }
}

}  // namespace outbox::pg
