// The launcher's databases (relay/launcher.cpp): pg_database as it last read it, and which of
// them hold an entry among outbox.max_databases (pg/relay_databases.hpp).
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "pg/postgres.hpp"
#include "relay/launcher.hpp"

namespace outbox::pg::relay {

class DatabaseEntries {
 public:
  // Reads pg_database again. Raises C++ exceptions (call outside guard()).
  void scan();
  const std::vector<ClusterDatabase>& all() const { return databases_; }
  // The database at the last scan, or null.
  const ClusterDatabase* find(Oid oid) const;

  // Entries for the databases that have, or may have, the extension: none for those that
  // are gone, nor for those a relay found without it (until a commit there asks for relays
  // again: it takes an entry, or waits for one). Databases that know they have the
  // extension (relay_database_waiting) take a free entry first. `scanned`: pg_database was
  // just read. Returns whether it gave entries back.
  bool track(bool scanned);

 private:
  bool take(const ClusterDatabase& d, bool has_extension);

  std::vector<ClusterDatabase> databases_;
  std::unordered_map<Oid, size_t> index_;  // into databases_
  std::unordered_set<Oid> absent_;         // a relay found no extension there
  std::unordered_set<Oid> warned_;         // logged as waiting for an entry
  uint32 waiting_lost_ = 0;
  bool full_logged_ = false;
};

}  // namespace outbox::pg::relay
