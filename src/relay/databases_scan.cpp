// The launcher's view of pg_database: which databases may have relays. A heap scan, as the
// autovacuum launcher does: with no database selected, only the shared catalogs' heaps can
// be read, not their indexes.
#include "relay/launcher.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "utils/snapmgr.h"
}

namespace outbox::pg::relay {
namespace {

// Runs inside guard(): fills `out` (palloc'd in the caller's context, `*max` rows; grown by
// repalloc as needed) and returns the count.
int scan(ClusterDatabase** out, int* max) {
  StartTransactionCommand();
  (void)GetTransactionSnapshot();
  Relation rel = table_open(DatabaseRelationId, AccessShareLock);
  TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
  int n = 0;
  for (HeapTuple tuple; (tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr;) {
    const auto* db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
    if (n == *max) {
      *max *= 2;
      *out = static_cast<ClusterDatabase*>(repalloc(*out, sizeof(ClusterDatabase) * *max));
    }
    ClusterDatabase& d = (*out)[n++];
    d.oid = db->oid;
    strlcpy(d.name, NameStr(db->datname), sizeof(d.name));
    // A template is what CREATE DATABASE copies: a session in it (a relay) would make that
    // fail. template0 takes no connections anyway.
    d.connectable = db->datallowconn && !db->datistemplate &&
                    (settings.database[0] == '\0' || strcmp(d.name, settings.database) == 0);
  }
  table_endscan(scan);
  table_close(rel, AccessShareLock);
  CommitTransactionCommand();
  return n;
}

}  // namespace

std::vector<ClusterDatabase> scan_databases() {
  int max = 64;
  auto* rows =
      static_cast<ClusterDatabase*>(guard([max] { return palloc(sizeof(ClusterDatabase) * max); }));
  const int n = guard([&rows, &max] { return scan(&rows, &max); });
  std::vector<ClusterDatabase> out(rows, rows + n);
  guard([rows] { pfree(rows); });
  return out;
}

}  // namespace outbox::pg::relay
