#include "pg/relay_shmem.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "pg/shard_of.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
}

namespace outbox::pg {
namespace {

struct Slot {
  slock_t mutex;
  bool in_use;
  PGPROC* proc;         // the worker's PGPROC: its procLatch is what we set
  bool wake_on_commit;  // commits that only enqueued set the latch
  uint64 wake_shards;   // ... if they enqueued in one of these shards
  WorkerCounters counters;
  TimestampTz restart_at;
  char detail[256];
};

struct RelayShared {
  pg_atomic_uint32 config_generation;
  // The sealed partitions' floor (relay_publish_floor): the database, and the bound as the
  // bits of a TimestampTz (0: none).
  pg_atomic_uint32 floor_database;
  pg_atomic_uint64 floor;
  int workers;
  Slot slots[kMaxWorkers];
};

RelayShared* shared = nullptr;
int requested_workers = 0;
shmem_startup_hook_type prev_shmem_startup = nullptr;
shmem_request_hook_type prev_shmem_request = nullptr;
ProcessUtility_hook_type prev_process_utility = nullptr;

// Per-backend, per-transaction flags for the commit callback: the shards whose owners to
// wake, and whether the configuration changed.
uint64 wake_pending = 0;
bool config_pending = false;
constexpr uint64 kAllShards = ~uint64{0};

void shmem_request() {
  if (prev_shmem_request) prev_shmem_request();
  RequestAddinShmemSpace(MAXALIGN(sizeof(RelayShared)));
}

void shmem_startup() {
  if (prev_shmem_startup) prev_shmem_startup();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  shared = static_cast<RelayShared*>(ShmemInitStruct("outbox relay", sizeof(RelayShared), &found));
  if (!found) {
    memset(shared, 0, sizeof(RelayShared));
    pg_atomic_init_u32(&shared->config_generation, 1);
    pg_atomic_init_u32(&shared->floor_database, InvalidOid);
    pg_atomic_init_u64(&shared->floor, 0);
    shared->workers = requested_workers;
    for (Slot& slot : shared->slots) SpinLockInit(&slot.mutex);
  }
  LWLockRelease(AddinShmemInitLock);
}

// Runs once the commit is visible (transaction callbacks come after ProcArrayEndTransaction),
// and a relay turns wake_on_commit on before it takes its fetch's snapshot: under the slot's
// spinlock, either this reads it on and sets the latch, or that snapshot sees the commit.
// A shard's owner publishes its mask before the first fetch that may send the shard, so the
// same holds for a commit that wakes only the owners of its shards.
void wake_workers(bool config_changed, uint64 shards) {
  for (int i = 0; i < shared->workers; ++i) {
    Slot& slot = shared->slots[i];
    SpinLockAcquire(&slot.mutex);
    const bool wake = config_changed || (slot.wake_on_commit && (slot.wake_shards & shards) != 0);
    PGPROC* proc = slot.in_use && wake ? slot.proc : nullptr;
    SpinLockRelease(&slot.mutex);
    if (proc != nullptr) SetLatch(&proc->procLatch);
  }
}

void xact_callback(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
      if (shared != nullptr) {
        if (config_pending) pg_atomic_fetch_add_u32(&shared->config_generation, 1);
        if (wake_pending != 0 || config_pending) wake_workers(config_pending, wake_pending);
      }
      wake_pending = 0;
      config_pending = false;
      break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:
      wake_pending = 0;
      config_pending = false;
      break;
    default:
      break;
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
    case WorkerState::kWaitingForExtension:
      return "waiting for CREATE EXTENSION";
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

void relay_shmem_request(int workers) {
  requested_workers = workers;
  prev_shmem_request = shmem_request_hook;
  shmem_request_hook = shmem_request;
  prev_shmem_startup = shmem_startup_hook;
  shmem_startup_hook = shmem_startup;
}

void relay_worker_attach(int index) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = true;
  slot.proc = MyProc;
  slot.wake_on_commit = true;
  slot.wake_shards = kAllShards;
  memset(&slot.counters, 0, sizeof(slot.counters));
  slot.counters.pid = MyProcPid;
  slot.counters.state = WorkerState::kStarting;
  slot.restart_at = 0;
  slot.detail[0] = '\0';
  SpinLockRelease(&slot.mutex);
}

void relay_worker_detach(int index, const char* why) {
  const TimestampTz now = GetCurrentTimestamp();
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = false;
  slot.proc = nullptr;
  slot.counters.state = WorkerState::kStopped;
  if (why != nullptr) {
    strlcpy(slot.counters.last_error, why, sizeof(slot.counters.last_error));
    slot.counters.last_error_at = now;
  }
  SpinLockRelease(&slot.mutex);
}

void relay_worker_wake_on_commit(int index, bool wake) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.wake_on_commit = wake;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_wake_shards(int index, uint64 shards) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.wake_shards = shards;
  SpinLockRelease(&slot.mutex);
}

bool relay_slot_in_use(int index) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  const bool in_use = slot.in_use;
  SpinLockRelease(&slot.mutex);
  return in_use;
}

void relay_slot_explain(int index, const char* detail, TimestampTz restart_at) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  strlcpy(slot.detail, detail, sizeof(slot.detail));
  slot.restart_at = restart_at;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_publish(int index, const WorkerCounters& counters) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.counters = counters;
  SpinLockRelease(&slot.mutex);
}

SlotView relay_slot_read(int index) {
  SlotView out;
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  out.in_use = slot.in_use;
  out.counters = slot.counters;
  out.restart_at = slot.restart_at;
  memcpy(out.detail, slot.detail, sizeof(out.detail));
  SpinLockRelease(&slot.mutex);
  return out;
}

int relay_worker_count() { return shared == nullptr ? 0 : shared->workers; }

void relay_publish_floor(Oid database, TimestampTz floor) {
  if (shared == nullptr) return;
  if (pg_atomic_read_u32(&shared->floor_database) != database) {
    pg_atomic_write_u64(&shared->floor, 0);
    pg_write_barrier();
    pg_atomic_write_u32(&shared->floor_database, database);
    pg_write_barrier();
  }
  // Only up: a floor that an enqueue has read must stay true for the rest of its transaction.
  uint64 current = pg_atomic_read_u64(&shared->floor);
  const uint64 wanted = static_cast<uint64>(floor);
  while ((current == 0 || static_cast<TimestampTz>(current) < floor) &&
         !pg_atomic_compare_exchange_u64(&shared->floor, &current, wanted)) {
  }
  // Before the caller reads which transactions run (see relay_enqueue_floor).
  pg_memory_barrier();
}

TimestampTz relay_enqueue_floor(Oid database) {
  if (shared == nullptr) return DT_NOBEGIN;
  // This transaction's virtual xid is visible to a relay before it reads the floor: either
  // the relay that published a floor sees the transaction running, or this sees the floor.
  pg_memory_barrier();
  if (pg_atomic_read_u32(&shared->floor_database) != database) return DT_NOBEGIN;
  pg_read_barrier();
  const uint64 floor = pg_atomic_read_u64(&shared->floor);
  return floor == 0 ? DT_NOBEGIN : static_cast<TimestampTz>(floor);
}

uint32 relay_config_generation() {
  return shared == nullptr ? 0 : pg_atomic_read_u32(&shared->config_generation);
}

void relay_wake_at_commit(bool config_changed) {
  if (settings.wake_at_commit) wake_pending = kAllShards;
  config_pending = config_pending || config_changed;
}

void relay_wake_owner_at_commit(Datum aggregatetype, Datum aggregateid) {
  if (!settings.wake_at_commit) return;
  wake_pending |= uint64{1} << shard_of(aggregatetype, aggregateid);
}

void relay_register_xact_callback() { RegisterXactCallback(xact_callback, nullptr); }

namespace {
// A plain C hook: no C++ object lives in its frame, so an ERROR may pass through it.
void process_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
                     DestReceiver* dest, QueryCompletion* qc) {
  Node* stmt = pstmt->utilityStmt;
  if (IsA(stmt, TransactionStmt) &&
      reinterpret_cast<TransactionStmt*>(stmt)->kind == TRANS_STMT_COMMIT_PREPARED) {
    relay_wake_at_commit(false);  // the prepared transaction's own wake-up was dropped at PREPARE
  }
  if (prev_process_utility != nullptr) {
    prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
  } else {
    standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
  }
}
}  // namespace

void relay_register_commit_prepared_hook() {
  prev_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = process_utility;
}

}  // namespace outbox::pg

// outbox._notify_relay(): wake the relay and make it reread its sink at commit.
OUTBOX_FUNCTION(outbox_notify_relay) {
  (void)fcinfo;
  outbox::pg::relay_wake_at_commit(true);
  return outbox::pg::guard([] { PG_RETURN_VOID(); });
}
