// The shared-memory hooks of every module that keeps a segment: the relay slots
// (pg/relay_slots.hpp), the databases the relays serve (pg/relay_databases.hpp) and the
// relay's cumulative statistics (pg/relay_stats.hpp), requested and made in one place.
#pragma once

namespace outbox::pg {

// _PG_init (preload only): reserve the segments, with `slots` relay slots, and install the
// hooks that make them.
void shmem_hooks_install(int slots);

}  // namespace outbox::pg
