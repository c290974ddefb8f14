// The launcher: a background worker that starts the relay workers of every database that
// has the extension, and restarts them (relay/launcher.cpp says why).
#pragma once

#include <vector>

#include "pg/postgres.hpp"
#include "pg/relay_databases.hpp"

namespace outbox::pg::relay {

// _PG_init, while preloading: registers the launcher with the postmaster.
void register_launcher();

// What the launcher tells a relay it starts, in bgw_extra (bgw_main_arg is its slot).
struct RelayStart {
  Oid database;
  int worker;  // its number in the database, from 0
};

// A row of pg_database, as the launcher sees it (databases_scan.cpp).
struct ClusterDatabase {
  Oid oid;
  char name[NAMEDATALEN];
  bool connectable;  // takes connections, is no template, and outbox.database allows it
};

// Every database of the cluster. Raises C++ exceptions (call outside guard()).
std::vector<ClusterDatabase> scan_databases();

}  // namespace outbox::pg::relay
