#include "pg/relay_databases.hpp"

#include "pg/settings.hpp"

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
  // Commits that wrote events or changed the configuration. Not reset when the entry is
  // taken again: a relay compares it only with what it read itself.
  pg_atomic_uint32 commits;
};

// Databases known to have the extension (a commit asked for their relays) that found every
// entry taken, for the launcher to track first when one frees. Past kWaiting of them,
// `waiting_lost` moves and the launcher checks every database again.
constexpr int kWaiting = 64;

struct Shared {
  slock_t lock;  // taking and giving back entries, `waiting`; the launcher's PGPROC
  PGPROC* launcher;
  pg_atomic_uint32 pokes;
  pg_atomic_uint32 waiting_lost;
  int capacity;  // outbox.max_databases
  Oid waiting[kWaiting];
  // capacity entries follow
};

Shared* shared = nullptr;

Entry* entries() {
  return reinterpret_cast<Entry*>(reinterpret_cast<char*>(shared) + MAXALIGN(sizeof(Shared)));
}
int last_found = 0;  // this process's last hit: most look up their own database

Entry* find(Oid database) {
  if (shared == nullptr || !OidIsValid(database)) return nullptr;
  if (pg_atomic_read_u32(&entries()[last_found].database) == database) {
    return &entries()[last_found];
  }
  for (int i = 0; i < shared->capacity; ++i) {
    if (pg_atomic_read_u32(&entries()[i].database) == database) {
      last_found = i;
      return &entries()[i];
    }
  }
  return nullptr;
}

// Under the lock.
void unwait(Oid database) {
  for (Oid& w : shared->waiting) {
    if (w == database) w = InvalidOid;
  }
}

// Under the lock: remembers that the database wants relays but got no entry.
void wait_for_entry(Oid database) {
  Oid* free_place = nullptr;
  for (Oid& w : shared->waiting) {
    if (w == database) return;
    if (w == InvalidOid && free_place == nullptr) free_place = &w;
  }
  if (free_place != nullptr) {
    *free_place = database;
  } else {
    pg_atomic_fetch_add_u32(&shared->waiting_lost, 1);
  }
}

// Under the lock.
Entry* find_or_add_locked(Oid database) {
  Entry* entry = find(database);
  for (int i = 0; entry == nullptr && i < shared->capacity; ++i) {
    Entry& e = entries()[i];
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
  if (entry != nullptr) unwait(database);
  return entry;
}

Entry* find_or_add(Oid database) {
  Entry* entry = find(database);
  if (entry != nullptr || shared == nullptr || !OidIsValid(database)) return entry;
  SpinLockAcquire(&shared->lock);
  entry = find_or_add_locked(database);
  SpinLockRelease(&shared->lock);
  return entry;
}

// Applies `change` to the database's entry, taken if need be, under the lock: the launcher
// gives back an absent database's entry under it too (relay_database_forget_absent), so no
// change lands in an entry given back. Without an entry, a database that `wants` relays
// waits for one; the launcher is woken either way.
template <typename Change>
void change_entry(Oid database, bool wants, Change&& change) {
  if (shared == nullptr || !OidIsValid(database)) return;
  SpinLockAcquire(&shared->lock);
  Entry* entry = find_or_add_locked(database);
  if (entry != nullptr) {
    change(*entry);
  } else if (wants) {
    wait_for_entry(database);
  }
  SpinLockRelease(&shared->lock);
}

}  // namespace

Size relay_databases_size() {
  return add_size(MAXALIGN(sizeof(Shared)), mul_size(sizeof(Entry), settings.max_databases));
}

void relay_databases_init() {
  bool found = false;
  shared = static_cast<Shared*>(
      ShmemInitStruct("outbox relay databases", relay_databases_size(), &found));
  if (found) return;
  memset(shared, 0, relay_databases_size());
  SpinLockInit(&shared->lock);
  pg_atomic_init_u32(&shared->pokes, 0);
  pg_atomic_init_u32(&shared->waiting_lost, 0);
  shared->capacity = settings.max_databases;
  for (int i = 0; i < shared->capacity; ++i) {
    Entry& e = entries()[i];
    pg_atomic_init_u32(&e.database, InvalidOid);
    pg_atomic_init_u32(&e.generation, 1);
    pg_atomic_init_u32(&e.requests, 1);
    pg_atomic_init_u32(&e.absent_at, 0);
    pg_atomic_init_u32(&e.paused, 0);
    pg_atomic_init_u32(&e.note, 0);
    pg_atomic_init_u64(&e.floor, 0);
    pg_atomic_init_u32(&e.replays, 0);
    pg_atomic_init_u32(&e.replays_seen, 0);
    pg_atomic_init_u32(&e.commits, 0);
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
  change_entry(database, true, [](Entry& e) {
    pg_atomic_fetch_add_u32(&e.generation, 1);
    pg_atomic_fetch_add_u32(&e.requests, 1);
  });
  relay_launcher_poke();
}

void relay_database_replay_requested(Oid database) {
  change_entry(database, true, [](Entry& e) { pg_atomic_fetch_add_u32(&e.replays, 1); });
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
  change_entry(database, false, [](Entry& e) { pg_atomic_fetch_add_u32(&e.paused, 1); });
}

void relay_database_resume(Oid database) {
  Entry* entry = find(database);
  if (entry != nullptr && pg_atomic_read_u32(&entry->paused) > 0) {
    pg_atomic_fetch_sub_u32(&entry->paused, 1);
  }
  relay_launcher_poke();
}

void relay_database_count_commit(Oid database) {
  Entry* entry = find(database);
  // A full barrier: the commit is visible before the count moves.
  if (entry != nullptr) pg_atomic_fetch_add_u32(&entry->commits, 1);
}

bool relay_database_commits(Oid database, uint32& count) {
  Entry* entry = find(database);
  if (entry == nullptr) return false;
  count = pg_atomic_read_u32(&entry->commits);
  // Read before the snapshot the pass takes next.
  pg_memory_barrier();
  return true;
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
  unwait(database);
  SpinLockRelease(&shared->lock);
}

bool relay_database_forget_absent(Oid database) {
  SpinLockAcquire(&shared->lock);
  Entry* entry = find(database);
  const bool idle =
      entry != nullptr &&
      pg_atomic_read_u32(&entry->absent_at) == pg_atomic_read_u32(&entry->requests) + 1 &&
      pg_atomic_read_u32(&entry->paused) == 0 &&
      pg_atomic_read_u32(&entry->replays) == pg_atomic_read_u32(&entry->replays_seen);
  if (idle) pg_atomic_write_u32(&entry->database, InvalidOid);
  SpinLockRelease(&shared->lock);
  return idle;
}

std::vector<Oid> relay_database_list() {
  std::vector<Oid> out;
  if (shared == nullptr) return out;
  for (int i = 0; i < shared->capacity; ++i) {
    const Oid database = pg_atomic_read_u32(&entries()[i].database);
    if (OidIsValid(database)) out.push_back(database);
  }
  return out;
}

int relay_database_capacity() { return shared == nullptr ? 0 : shared->capacity; }

bool relay_databases_full() {
  if (shared == nullptr) return false;
  for (int i = 0; i < shared->capacity; ++i) {
    if (pg_atomic_read_u32(&entries()[i].database) == InvalidOid) return false;
  }
  return true;
}

std::vector<Oid> relay_database_waiting() {
  std::vector<Oid> out;
  if (shared == nullptr) return out;
  SpinLockAcquire(&shared->lock);
  Oid waiting[kWaiting];
  memcpy(waiting, shared->waiting, sizeof(waiting));
  SpinLockRelease(&shared->lock);
  for (const Oid w : waiting) {
    if (OidIsValid(w)) out.push_back(w);
  }
  return out;
}

uint32 relay_database_waiting_lost() { return pg_atomic_read_u32(&shared->waiting_lost); }

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
