// See event_indexes.hpp.
#include "pg/event_indexes.hpp"

extern "C" {
#include "access/genam.h"
#include "catalog/index.h"
#include "nodes/primnodes.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/relcache.h"
}

namespace outbox::pg {
namespace {

// Per index: the attribute whose IS NOT NULL is its whole predicate, or 0 (any other index).
struct IndexShape {
  Oid index;  // hash key
  AttrNumber not_null_attno;
};

HTAB* shapes = nullptr;

void forget_shapes(Datum, Oid relid) {
  if (shapes == nullptr) return;
  if (OidIsValid(relid)) {
    (void)hash_search(shapes, &relid, HASH_REMOVE, nullptr);
    return;
  }
  hash_destroy(shapes);
  shapes = nullptr;
}

AttrNumber not_null_predicate(Relation index) {
  if (heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr)) return 0;
  List* predicate = RelationGetIndexPredicate(index);
  if (list_length(predicate) != 1) return 0;
  const Node* node = static_cast<const Node*>(linitial(predicate));
  if (!IsA(node, NullTest)) return 0;
  const auto* test = reinterpret_cast<const NullTest*>(node);
  if (test->nulltesttype != IS_NOT_NULL || test->argisrow || !IsA(test->arg, Var)) return 0;
  return reinterpret_cast<const Var*>(test->arg)->varattno;
}

// The shape of index `oid`, from the cache or read once (the index opened and closed, its
// lock kept to the end of the transaction as an INSERT keeps it).
AttrNumber shape_of(Oid oid) {
  if (shapes == nullptr) {
    static bool registered = false;
    if (!registered) {
      CacheRegisterRelcacheCallback(forget_shapes, 0);
      registered = true;
    }
    HASHCTL ctl{};
    ctl.keysize = sizeof(Oid);
    ctl.entrysize = sizeof(IndexShape);
    ctl.hcxt = TopMemoryContext;
    shapes =
        hash_create("outbox event index shapes", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  }
  bool found = false;
  auto* entry = static_cast<IndexShape*>(hash_search(shapes, &oid, HASH_FIND, &found));
  if (found) return entry->not_null_attno;
  Relation index = index_open(oid, RowExclusiveLock);
  const AttrNumber attno = not_null_predicate(index);
  index_close(index, NoLock);
  // Opening the index may have processed an invalidation that reset the cache.
  if (shapes == nullptr) return attno;
  entry = static_cast<IndexShape*>(hash_search(shapes, &oid, HASH_ENTER, &found));
  entry->not_null_attno = attno;
  return attno;
}

}  // namespace

void open_event_indexes(ResultRelInfo* info, const bool* isnull) {
  Relation rel = info->ri_RelationDesc;
  info->ri_NumIndices = 0;
  if (!RelationGetForm(rel)->relhasindex) return;
  List* oids = RelationGetIndexList(rel);
  const int most = list_length(oids);
  if (most == 0) return;
  auto* descs = static_cast<RelationPtr>(palloc(sizeof(Relation) * most));
  auto* infos = static_cast<IndexInfo**>(palloc(sizeof(IndexInfo*) * most));
  const int natts = RelationGetDescr(rel)->natts;
  int n = 0;
  ListCell* cell;
  foreach (cell, oids) {
    const Oid oid = lfirst_oid(cell);
    const AttrNumber attno = shape_of(oid);
    if (attno > 0 && attno <= natts && isnull[attno - 1]) continue;
    descs[n] = index_open(oid, RowExclusiveLock);
    infos[n] = BuildIndexInfo(descs[n]);
    ++n;
  }
  list_free(oids);
  info->ri_NumIndices = n;
  info->ri_IndexRelationDescs = descs;
  info->ri_IndexRelationInfo = infos;
}

}  // namespace outbox::pg
