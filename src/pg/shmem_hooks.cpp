#include "pg/shmem_hooks.hpp"

#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/relay_stats.hpp"

extern "C" {
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace outbox::pg {
namespace {

int requested_slots = 0;
shmem_startup_hook_type prev_shmem_startup = nullptr;
shmem_request_hook_type prev_shmem_request = nullptr;

void shmem_request() {
  if (prev_shmem_request) prev_shmem_request();
  RequestAddinShmemSpace(relay_slots_size());
  RequestAddinShmemSpace(relay_databases_size());
  RequestAddinShmemSpace(relay_stats_size());
}

void shmem_startup() {
  if (prev_shmem_startup) prev_shmem_startup();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  relay_slots_init(requested_slots);
  relay_databases_init();
  relay_stats_init();
  LWLockRelease(AddinShmemInitLock);
}

}  // namespace

void shmem_hooks_install(int slots) {
  requested_slots = slots;
  prev_shmem_request = shmem_request_hook;
  shmem_request_hook = shmem_request;
  prev_shmem_startup = shmem_startup_hook;
  shmem_startup_hook = shmem_startup;
}

}  // namespace outbox::pg
