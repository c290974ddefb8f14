// Which databases hold an entry among outbox.max_databases (database_entries.hpp): the
// launcher takes one for every database that has, or may have, the extension, and gives back
// those of databases that are gone or that a relay found without it.
#include <iterator>

#include "relay/database_entries.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_slots.hpp"
#include "pg/relay_stats.hpp"

namespace outbox::pg::relay {
namespace {

// A slot of the database's: its entry stays while a worker may run there.
bool assigned(Oid oid) {
  for (int i = 0; i < relay_slot_count(); ++i) {
    if (relay_slot_read(i).database == oid) return true;
  }
  return false;
}

}  // namespace

void DatabaseEntries::scan() {
  databases_ = scan_databases();
  index_.clear();
  for (size_t k = 0; k < databases_.size(); ++k) index_[databases_[k].oid] = k;
}

const ClusterDatabase* DatabaseEntries::find(Oid oid) const {
  const auto it = index_.find(oid);
  return it == index_.end() ? nullptr : &databases_[it->second];
}

bool DatabaseEntries::track(bool scanned) {
  if (relay_database_waiting_lost() != waiting_lost_) {
    waiting_lost_ = relay_database_waiting_lost();
    absent_.clear();  // which asked is unknown: every database may have it
  }
  bool freed = false;
  for (const Oid oid : relay_database_list()) {
    absent_.erase(oid);  // an entry the launcher gave back is taken again: asked for
    if (assigned(oid)) continue;
    if (find(oid) == nullptr) {
      relay_database_forget(oid);
      relay_stats_forget(oid);
      freed = true;
    } else if (relay_database_forget_absent(oid)) {
      absent_.insert(oid);
      relay_stats_forget(oid);
      freed = true;
    }
  }
  if (!scanned && !freed) return false;
  if (scanned) {
    for (auto it = absent_.begin(); it != absent_.end();) {
      it = find(*it) == nullptr ? absent_.erase(it) : std::next(it);
    }
  }
  bool all_taken = true;
  for (const Oid oid : relay_database_waiting()) {
    const ClusterDatabase* d = find(oid);
    if (d == nullptr) {
      if (scanned) relay_database_forget(oid);  // gone: it waits no more
      continue;
    }
    absent_.erase(oid);
    if (d->connectable) all_taken = take(*d, true) && all_taken;
  }
  for (const ClusterDatabase& d : databases_) {
    if (d.connectable && absent_.count(d.oid) == 0) all_taken = take(d, false) && all_taken;
  }
  if (all_taken) full_logged_ = false;
  return freed;
}

// An entry for the database; false when every entry is taken, which is logged once per
// database known to have the extension, and once for the others until entries free.
bool DatabaseEntries::take(const ClusterDatabase& d, bool has_extension) {
  if (relay_database_track(d.oid)) {
    warned_.erase(d.oid);
    return true;
  }
  if (has_extension ? !warned_.insert(d.oid).second : full_logged_) return false;
  full_logged_ = full_logged_ || !has_extension;
  const int max = relay_database_capacity();
  guard([&] {
    ereport(WARNING,
            (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
             has_extension ? errmsg("outbox launcher: outbox.max_databases (%d) databases "
                                    "already have relays; database \"%s\" gets none until "
                                    "one of them frees its entry",
                                    max, d.name)
                           : errmsg("outbox launcher: outbox.max_databases (%d) databases "
                                    "already have relays; database \"%s\" and others are "
                                    "not checked for the extension until one frees its entry",
                                    max, d.name),
             errhint("Raise outbox.max_databases and restart the server, or drop the "
                     "extension where no relay is needed. A database that drops it, or is "
                     "dropped, frees its entry at once.")));
  });
  return false;
}

}  // namespace outbox::pg::relay
