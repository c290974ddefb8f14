// The databases the relay serves, in shared memory: outbox.max_databases entries, one per
// database that has the extension or may have it (the launcher's, relay/launcher.cpp), or
// whose sink configuration changed. A database found without the extension gives its entry
// back. Each entry carries what
// the sessions and relays of one database share, apart from other databases':
//  - the sink configuration's generation: configure_sink, unconfigure_sink, CREATE and
//    DROP EXTENSION move it at commit, and only that database's relays read their sink
//    again;
//  - the sealed partitions' floor (docs/design.md, "Sealed partitions");
//  - whether the extension is there: a relay that finds none marks the database absent and
//    exits; the next commit that changes the configuration (CREATE EXTENSION) makes it
//    wanted again and wakes the launcher;
//  - whether a replay waits for the replay worker (relay/replay.cpp);
//  - a count of the commits that wrote events through outbox's functions or changed its
//    configuration: an idle relay whose count did not move skips its pass (relay/idle.cpp);
//  - the sessions that need the database to themselves for a moment (DROP DATABASE,
//    CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME or SET TABLESPACE): while one
//    runs, no relay starts there.
#pragma once

#include <vector>

#include "pg/postgres.hpp"

namespace outbox::pg {

// What the launcher decided for a database, shown by outbox.status while fewer relays run
// there than outbox.workers.
enum class DatabaseNote : uint32 { kNone, kNoWorkerLeft, kPaused, kNotConnectable };

struct DatabaseView {
  bool tracked;       // the database has an entry
  bool absent;        // a relay found no extension there, and none was created since
  bool paused;        // a session needs it to itself
  bool replay;        // a replay was requested since the replay worker last found none
  DatabaseNote note;  // set by the launcher
};

// From pg/shmem_hooks.cpp.
Size relay_databases_size();
void relay_databases_init();

// Backend side, after the commit of a transaction that changed the sink configuration or
// the extension: moves the database's generation, makes it wanted, wakes the launcher.
// Where every entry is taken, the database waits for one (relay_database_waiting).
void relay_database_changed(Oid database);
// Backend side, after the commit of outbox.replay(), and a relay that finds a replay running
// at its start: the database wants its replay worker; wakes the launcher.
void relay_database_replay_requested(Oid database);
// Replay worker side: read the count before looking for a running replay; when it finds
// none, it says so with the count it read, and is no longer wanted unless one came since.
uint32 relay_database_replays(Oid database);
void relay_database_replays_done(Oid database, uint32 replays);
// Backend side: no relay starts in the database until the matching resume (ProcessUtility
// hook, pg/database_commands.cpp); wakes the launcher on resume.
void relay_database_pause(Oid database);
void relay_database_resume(Oid database);
// Backend side: the launcher reads pg_database again (ALTER DATABASE ... ALLOW_CONNECTIONS).
void relay_launcher_poke();

// Backend side, after a commit that wrote events through outbox's functions (enqueue,
// requeue, a COMMIT PREPARED) or changed the configuration, before it wakes the relays:
// moves the database's commit count. No lock; nothing without an entry.
void relay_database_count_commit(Oid database);

// Relay side.
// The database's commit count, in `count`; false without an entry (then nothing can be
// told from it). Read before the pass's snapshot: a commit it did not count is visible.
bool relay_database_commits(Oid database, uint32& count);
uint32 relay_database_generation(Oid database);
uint32 relay_database_requests(Oid database);
// No extension was there when the relay read `requests` (before its look): unless a
// CREATE EXTENSION committed since, the launcher starts no relay there again.
void relay_database_absent(Oid database, uint32 requests);
bool relay_database_paused(Oid database);

// The sealed partitions' floor. The relay publishes the bound it is about to seal below,
// before it reads which transactions run; enqueue in that database routes no event below it
// (relay_enqueue_floor, DT_NOBEGIN when there is none). It only goes up, until the server
// restarts.
void relay_publish_floor(Oid database, TimestampTz floor);
TimestampTz relay_enqueue_floor(Oid database);

// Launcher side.
void relay_launcher_attach();
uint32 relay_launcher_pokes();            // moves whenever it should look again
bool relay_database_track(Oid database);  // false when every entry is taken
void relay_database_forget(Oid database);
// Gives the entry back if a relay found no extension there, and nothing asked for relays
// since (no CREATE EXTENSION, replay, or paused command); returns whether it did.
bool relay_database_forget_absent(Oid database);
// The databases known to have the extension that found every entry taken, and a count that
// moves when more of them came than that list holds.
std::vector<Oid> relay_database_waiting();
uint32 relay_database_waiting_lost();
void relay_database_note(Oid database, DatabaseNote note);
// Reader side (and the launcher).
DatabaseView relay_database_read(Oid database);
std::vector<Oid> relay_database_list();  // the tracked databases
int relay_database_capacity();           // outbox.max_databases; 0 without preloading
bool relay_databases_full();             // every entry is taken

}  // namespace outbox::pg
