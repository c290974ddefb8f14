// Library entry point: the module magic and _PG_init.
#include "pg/boundary.hpp"
#include "pg/settings.hpp"

extern "C" {
PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);
}

void _PG_init(void) {
  // _PG_init runs inside PostgreSQL's own error handling, not under invoke(): nothing here
  // may throw a C++ exception.
  outbox::pg::define_settings();
}
