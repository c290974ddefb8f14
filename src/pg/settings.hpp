// outbox.* settings (GUCs). Defined in _PG_init; read directly by the C++ code.
#pragma once

namespace outbox::pg {

struct Settings {
  int max_payload_bytes;
  int partition_interval_s;
  int retention_s;
  int premake;
  int rotate_lock_timeout_ms;
};

// Current values. Valid after define_settings().
extern Settings settings;

void define_settings();

}  // namespace outbox::pg
