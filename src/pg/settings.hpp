// outbox.* settings (GUCs). Defined in _PG_init; read directly by the C++ code.
#pragma once

namespace outbox::pg {

// The upper bounds of outbox.workers and outbox.max_workers (the relay slots of
// pg/relay_slots.hpp).
constexpr int kMaxWorkers = 32;      // per database (outbox.workers)
constexpr int kMaxRelaySlots = 256;  // in the cluster (outbox.max_workers)

struct Settings {
  int max_payload_bytes;
  int max_headers_bytes;
  int partition_interval_s;
  int retention_s;
  int inbox_retention_s;
  int premake;
  int rotate_lock_timeout_ms;
  int partition_fillfactor;
  // Relay (background workers; need shared_preload_libraries).
  char* database;     // empty: every database that has the extension
  int workers;        // per database
  int max_workers;    // in the cluster
  int max_databases;  // the launcher's entries: databases that have (or may have) the extension
  int ordering;       // Ordering: retired (none means key); read only to warn
  int batch_size;
  int batch_max_bytes;
  int poll_interval_ms;
  int idle_check_interval_ms;  // a relay with nothing to do reads the queue this often
  int send_timeout_ms;
  int max_attempts;
  int retry_backoff_min_ms;
  int retry_backoff_max_ms;
  bool wake_at_commit;
  int min_batch_interval_ms;
  int replay_share;  // percent of the time the replay worker may keep a core busy (live events)
  // Trust (0.4.0).
  bool wait_for_sync_standbys;  // publish only what the synchronous standbys have flushed
  char* sink_files_directory;   // where sink options that name files (and secrets) may point
  bool drop_discards_events;    // DROP EXTENSION may discard unpublished events
  int sink_isolation;           // SinkIsolation: the sink in a process of its own, or not
  // Consumer's inbox (0.7.0).
  bool inbox_require_binding;  // inbox_receive refuses a consumer name bound to no role
};

enum Ordering { kOrderingKey = 0, kOrderingNone = 1 };  // none: retired in 0.6.0
enum SinkIsolation { kSinkIsolationProcess = 0, kSinkIsolationNone = 1 };

// Current values. Valid after define_settings().
extern Settings settings;

void define_settings();

}  // namespace outbox::pg
