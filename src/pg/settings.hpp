// outbox.* settings (GUCs). Defined in _PG_init; read directly by the C++ code.
#pragma once

namespace outbox::pg {

struct Settings {
  int max_payload_bytes;
  int partition_interval_s;
  int retention_s;
  int premake;
  int rotate_lock_timeout_ms;
  int partition_fillfactor;
  // Relay (background workers; need shared_preload_libraries).
  char* database;
  int workers;
  int batch_size;
  int batch_max_bytes;
  int poll_interval_ms;
  int send_timeout_ms;
  int max_attempts;
  int retry_backoff_min_ms;
  int retry_backoff_max_ms;
  bool wake_at_commit;
  int min_batch_interval_ms;
};

// Current values. Valid after define_settings().
extern Settings settings;

void define_settings();

}  // namespace outbox::pg
