// Library entry point: the module magic, _PG_init, and outbox.version().
#include "pg/boundary.hpp"
#include "pg/commit_wake.hpp"
#include "pg/database_commands.hpp"
#include "pg/relay_stats.hpp"
#include "pg/settings.hpp"
#include "pg/shmem_hooks.hpp"
#include "relay/launcher.hpp"

extern "C" {
OUTBOX_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);
}

void _PG_init(void) {
  // _PG_init runs inside PostgreSQL's own error handling, not under invoke(): nothing here
  // may throw a C++ exception.
  outbox::pg::define_settings();
  outbox::pg::relay_register_xact_callback();
  outbox::pg::relay_stats_register_xact_callback();

  // enqueue and rotate work without preloading; the relay needs it.
  if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade) return;
  outbox::pg::shmem_hooks_install(outbox::pg::settings.max_workers);
  outbox::pg::relay_register_database_commands();
  if (outbox::pg::settings.workers > 0 && outbox::pg::settings.max_workers > 0) {
    outbox::pg::relay::register_launcher();
  }
}

// outbox.version(): the library's own version (EXTVERSION when it was built).
OUTBOX_FUNCTION(outbox_version) {
  (void)fcinfo;  // no arguments
  return outbox::pg::guard([] { return CStringGetTextDatum(OUTBOX_VERSION); });
}
