#include "pg/relay_databases.hpp"

extern "C" {
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
}

namespace outbox::pg {
namespace {

// Lock-free reads: an entry's database is written last when it is taken and first when it is
// given back, and readers check it again after reading the rest.
struct Entry {
  pg_atomic_uint32 database;  // InvalidOid: free
  pg_atomic_uint32 generation;
  pg_atomic_uint32 requests;
  pg_atomic_uint32 absent_at;  // requests + 1 when a relay found no extension
  pg_atomic_uint32 paused;
  pg_atomic_uint32 note;
  pg_atomic_uint64 floor;  // a TimestampTz's bits; 0: none
  // Replays: requested at commit (outbox.replay(), a relay that finds one running), and the
  // count the replay worker had read when it last found none. Wanted while they differ.
  pg_atomic_uint32 replays;
  pg_atomic_uint32 replays_seen;
};

struct Shared {
  slock_t lock;  // taking and giving back entries; the launcher's PGPROC
  PGPROC* launcher;
  pg_atomic_uint32 pokes;
  Entry entries[kMaxDatabases];
};

Shared* shared = nullptr;
int last_found = 0;  // this process's last hit: most look up their own database

Entry* find(Oid database) {
  if (shared == nullptr || !OidIsValid(database)) return nullptr;
  if (pg_atomic_read_u32(&shared->entries[last_found].database) == database) {
    return &shared->entries[last_found];
  }
  for (int i = 0; i < kMaxDatabases; ++i) {
    if (pg_atomic_read_u32(&shared->entries[i].database) == database) {
      last_found = i;
      return &shared->entries[i];
    }
  }
  return nullptr;
}

Entry* find_or_add(Oid database) {
  Entry* entry = find(database);
  if (entry != nullptr || shared == nullptr || !OidIsValid(database)) return entry;
  SpinLockAcquire(&shared->lock);
  entry = find(database);
  for (int i = 0; entry == nullptr && i < kMaxDatabases; ++i) {
    Entry& e = shared->entries[i];
    if (pg_atomic_read_u32(&e.database) != InvalidOid) continue;
    pg_atomic_write_u32(&e.generation, 1);
    pg_atomic_write_u32(&e.requests, 1);
    pg_atomic_write_u32(&e.absent_at, 0);
    pg_atomic_write_u32(&e.paused, 0);
    pg_atomic_write_u32(&e.note, static_cast<uint32>(DatabaseNote::kNone));
    pg_atomic_write_u64(&e.floor, 0);
    pg_atomic_write_u32(&e.replays, 0);
    pg_atomic_write_u32(&e.replays_seen, 0);
    pg_write_barrier();
    pg_atomic_write_u32(&e.database, database);
    entry = &e;
  }
  SpinLockRelease(&shared->lock);
  return entry;
}

}  // namespace

Size relay_databases_size() { return MAXALIGN(sizeof(Shared)); }

void relay_databases_init() {
  bool found = false;
  shared = static_cast<Shared*>(ShmemInitStruct("outbox relay databases", sizeof(Shared), &found));
  if (found) return;
  memset(shared, 0, sizeof(Shared));
  SpinLockInit(&shared->lock);
  pg_atomic_init_u32(&shared->pokes, 0);
  for (Entry& e : shared->entries) {
    pg_atomic_init_u32(&e.database, InvalidOid);
    pg_atomic_init_u32(&e.generation, 1);
    pg_atomic_init_u32(&e.requests, 1);
    pg_atomic_init_u32(&e.absent_at, 0);
    pg_atomic_init_u32(&e.paused, 0);
    pg_atomic_init_u32(&e.note, 0);
    pg_atomic_init_u64(&e.floor, 0);
    pg_atomic_init_u32(&e.replays, 0);
    pg_atomic_init_u32(&e.replays_seen, 0);
  }
}

void relay_launcher_poke() {
  if (shared == nullptr) return;
  pg_atomic_fetch_add_u32(&shared->pokes, 1);
  SpinLockAcquire(&shared->lock);
  PGPROC* launcher = shared->launcher;
  SpinLockRelease(&shared->lock);
  if (launcher != nullptr) SetLatch(&launcher->procLatch);
}

void relay_database_changed(Oid database) {
  Entry* entry = find_or_add(database);
  if (entry == nullptr) return;
  pg_atomic_fetch_add_u32(&entry->generation, 1);
  pg_atomic_fetch_add_u32(&entry->requests, 1);
  relay_launcher_poke();
}

void relay_database_replay_requested(Oid database) {
  Entry* entry = find_or_add(database);
  if (entry == nullptr) return;
  pg_atomic_fetch_add_u32(&entry->replays, 1);
  relay_launcher_poke();
}

uint32 relay_database_replays(Oid database) {
  Entry* entry = find(database);
  return entry == nullptr ? 0 : pg_atomic_read_u32(&entry->replays);
}

void relay_database_replays_done(Oid database, uint32 replays) {
  Entry* entry = find(database);
  if (entry != nullptr) pg_atomic_write_u32(&entry->replays_seen, replays);
}

void relay_database_pause(Oid database) {
  Entry* entry = find_or_add(database);
  if (entry != nullptr) pg_atomic_fetch_add_u32(&entry->paused, 1);
}

void relay_database_resume(Oid database) {
  Entry* entry = find(database);
  if (entry != nullptr && pg_atomic_read_u32(&entry->paused) > 0) {
    pg_atomic_fetch_sub_u32(&entry->paused, 1);
  }
  relay_launcher_poke();
}

uint32 relay_database_generation(Oid database) {
  Entry* entry = find(database);
  return entry == nullptr ? 0 : pg_atomic_read_u32(&entry->generation);
}

uint32 relay_database_requests(Oid database) {
  Entry* entry = find(database);
  return entry == nullptr ? 0 : pg_atomic_read_u32(&entry->requests);
}

void relay_database_absent(Oid database, uint32 requests) {
  Entry* entry = find(database);
  if (entry != nullptr) pg_atomic_write_u32(&entry->absent_at, requests + 1);
}

bool relay_database_paused(Oid database) {
  Entry* entry = find(database);
  return entry != nullptr && pg_atomic_read_u32(&entry->paused) > 0;
}

void relay_publish_floor(Oid database, TimestampTz floor) {
  Entry* entry = find(database);
  if (entry == nullptr) return;
  // Only up: a floor that an enqueue has read must stay true for the rest of its transaction.
  uint64 current = pg_atomic_read_u64(&entry->floor);
  const uint64 wanted = static_cast<uint64>(floor);
  while ((current == 0 || static_cast<TimestampTz>(current) < floor) &&
         !pg_atomic_compare_exchange_u64(&entry->floor, &current, wanted)) {
  }
  // Before the caller reads which transactions run (see relay_enqueue_floor).
  pg_memory_barrier();
}

TimestampTz relay_enqueue_floor(Oid database) {
  if (shared == nullptr) return DT_NOBEGIN;
  // This transaction's virtual xid is visible to a relay before it reads the floor: either
  // the relay that published a floor sees the transaction running, or this sees the floor.
  pg_memory_barrier();
  Entry* entry = find(database);
  if (entry == nullptr) return DT_NOBEGIN;
  const uint64 floor = pg_atomic_read_u64(&entry->floor);
  return floor == 0 ? DT_NOBEGIN : static_cast<TimestampTz>(floor);
}

void relay_launcher_attach() {
  SpinLockAcquire(&shared->lock);
  shared->launcher = MyProc;
  SpinLockRelease(&shared->lock);
}

uint32 relay_launcher_pokes() { return pg_atomic_read_u32(&shared->pokes); }

bool relay_database_track(Oid database) { return find_or_add(database) != nullptr; }

void relay_database_forget(Oid database) {
  SpinLockAcquire(&shared->lock);
  Entry* entry = find(database);
  if (entry != nullptr) pg_atomic_write_u32(&entry->database, InvalidOid);
  SpinLockRelease(&shared->lock);
}

int relay_database_list(Oid* out, int max) {
  int n = 0;
  for (int i = 0; i < kMaxDatabases && n < max; ++i) {
    const Oid database = pg_atomic_read_u32(&shared->entries[i].database);
    if (OidIsValid(database)) out[n++] = database;
  }
  return n;
}

void relay_database_note(Oid database, DatabaseNote note) {
  Entry* entry = find(database);
  if (entry != nullptr) pg_atomic_write_u32(&entry->note, static_cast<uint32>(note));
}

DatabaseView relay_database_read(Oid database) {
  DatabaseView view{};
  Entry* entry = find(database);
  if (entry == nullptr) return view;
  view.tracked = true;
  view.absent = pg_atomic_read_u32(&entry->absent_at) == pg_atomic_read_u32(&entry->requests) + 1;
  view.paused = pg_atomic_read_u32(&entry->paused) > 0;
  view.replay = pg_atomic_read_u32(&entry->replays) != pg_atomic_read_u32(&entry->replays_seen);
  view.note = static_cast<DatabaseNote>(pg_atomic_read_u32(&entry->note));
  return view;
}

}  // namespace outbox::pg
