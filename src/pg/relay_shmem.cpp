#include "pg/relay_shmem.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/tuplestore.h"
}

namespace outbox::pg {
namespace {

struct Slot {
  slock_t mutex;
  bool in_use;
  PGPROC* proc;  // the worker's PGPROC: its procLatch is what we set
  WorkerCounters counters;
};

struct RelayShared {
  pg_atomic_uint32 config_generation;
  int workers;
  Slot slots[kMaxWorkers];
};

RelayShared* shared = nullptr;
int requested_workers = 0;
shmem_startup_hook_type prev_shmem_startup = nullptr;
#if PG_VERSION_NUM >= 150000
shmem_request_hook_type prev_shmem_request = nullptr;
#endif

// Per-backend, per-transaction flags for the commit callback.
bool wake_pending = false;
bool config_pending = false;

void shmem_request() {
#if PG_VERSION_NUM >= 150000
  if (prev_shmem_request) prev_shmem_request();
#endif
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
    shared->workers = requested_workers;
    for (Slot& slot : shared->slots) SpinLockInit(&slot.mutex);
  }
  LWLockRelease(AddinShmemInitLock);
}

void wake_workers() {
  for (int i = 0; i < shared->workers; ++i) {
    Slot& slot = shared->slots[i];
    SpinLockAcquire(&slot.mutex);
    PGPROC* proc = slot.in_use ? slot.proc : nullptr;
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
        if (wake_pending || config_pending) wake_workers();
      }
      wake_pending = config_pending = false;
      break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:
      wake_pending = config_pending = false;
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
  }
  return "unknown";
}

bool relay_shmem_available() { return shared != nullptr; }

void relay_shmem_request(int workers) {
  requested_workers = workers;
#if PG_VERSION_NUM >= 150000
  prev_shmem_request = shmem_request_hook;
  shmem_request_hook = shmem_request;
#else
  shmem_request();
#endif
  prev_shmem_startup = shmem_startup_hook;
  shmem_startup_hook = shmem_startup;
}

void relay_worker_attach(int index) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = true;
  slot.proc = MyProc;
  memset(&slot.counters, 0, sizeof(slot.counters));
  slot.counters.pid = MyProcPid;
  slot.counters.state = WorkerState::kStarting;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_detach(int index) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.in_use = false;
  slot.proc = nullptr;
  SpinLockRelease(&slot.mutex);
}

void relay_worker_publish(int index, const WorkerCounters& counters) {
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  slot.counters = counters;
  SpinLockRelease(&slot.mutex);
}

bool relay_worker_read(int index, WorkerCounters* out) {
  if (shared == nullptr || index >= shared->workers) return false;
  Slot& slot = shared->slots[index];
  SpinLockAcquire(&slot.mutex);
  bool in_use = slot.in_use;
  *out = slot.counters;
  SpinLockRelease(&slot.mutex);
  return in_use;
}

int relay_worker_count() { return shared == nullptr ? 0 : shared->workers; }

uint32 relay_config_generation() {
  return shared == nullptr ? 0 : pg_atomic_read_u32(&shared->config_generation);
}

void relay_wake_at_commit(bool config_changed) {
  wake_pending = wake_pending || settings.wake_at_commit;
  config_pending = config_pending || config_changed;
}

void relay_register_xact_callback() { RegisterXactCallback(xact_callback, nullptr); }

}  // namespace outbox::pg

// outbox._notify_relay(): wake the relay and make it reread its sink at commit.
OUTBOX_FUNCTION(outbox_notify_relay) {
  (void)fcinfo;
  outbox::pg::relay_wake_at_commit(true);
  return outbox::pg::guard([] { PG_RETURN_VOID(); });
}

// outbox._workers(): one row per relay worker slot in use.
OUTBOX_FUNCTION(outbox_workers) {
  using outbox::pg::WorkerCounters;
  outbox::pg::guard([&] {
    // Materialize mode by hand (InitMaterializedSRF exists from PostgreSQL 15 only).
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) ||
        (rsinfo->allowedModes & SFRM_Materialize) == 0) {
      ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                      errmsg("outbox._workers must be called in a FROM clause")));
    }
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
      elog(ERROR, "outbox._workers must return a record");
    }
    MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
    rsinfo->returnMode = SFRM_Materialize;
    rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
    rsinfo->setDesc = CreateTupleDescCopy(desc);
    MemoryContextSwitchTo(old);
    for (int i = 0; i < outbox::pg::relay_worker_count(); ++i) {
      WorkerCounters c;
      if (!outbox::pg::relay_worker_read(i, &c)) continue;
      Datum values[12];
      bool nulls[12] = {};
      values[0] = Int32GetDatum(i + 1);
      values[1] = Int32GetDatum(c.pid);
      values[2] = CStringGetTextDatum(outbox::pg::worker_state_name(c.state));
      nulls[3] = c.sink[0] == '\0';
      values[3] = CStringGetTextDatum(c.sink);
      values[4] = Int64GetDatum(static_cast<int64>(c.batches));
      values[5] = Int64GetDatum(static_cast<int64>(c.events_sent));
      values[6] = Int64GetDatum(static_cast<int64>(c.events_failed));
      values[7] = Int64GetDatum(static_cast<int64>(c.events_dead));
      nulls[8] = c.last_error[0] == '\0';
      values[8] = CStringGetTextDatum(c.last_error);
      nulls[9] = c.last_error_at == 0;
      values[9] = TimestampTzGetDatum(c.last_error_at);
      nulls[10] = c.last_success_at == 0;
      values[10] = TimestampTzGetDatum(c.last_success_at);
      nulls[11] = c.backoff_until == 0;
      values[11] = TimestampTzGetDatum(c.backoff_until);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
  });
  return (Datum)0;
}
