// Library entry point: the module magic and _PG_init.
#include "pg/boundary.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "postmaster/bgworker.h"
}

extern "C" {
PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);
}

namespace {

void register_relay_workers() {
  for (int i = 0; i < outbox::pg::settings.workers; ++i) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    // After an error the worker exits and the postmaster starts it again after this
    // many seconds; it never crash-loops faster.
    worker.bgw_restart_time = 5;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "outbox");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "outbox_relay_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "outbox relay %d", i + 1);
    snprintf(worker.bgw_type, BGW_MAXLEN, "outbox relay");
    worker.bgw_main_arg = Int32GetDatum(i);
    RegisterBackgroundWorker(&worker);
  }
}

}  // namespace

void _PG_init(void) {
  // _PG_init runs inside PostgreSQL's own error handling, not under invoke(): nothing here
  // may throw a C++ exception.
  outbox::pg::define_settings();
  outbox::pg::relay_register_xact_callback();

  // enqueue and rotate work without preloading; the relay needs it.
  if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade) return;
  outbox::pg::relay_shmem_request(outbox::pg::settings.workers);
  register_relay_workers();
}
