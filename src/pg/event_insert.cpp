// See event_insert.hpp.
#include "pg/event_insert.hpp"

#include <array>
#include <cstring>

#include "pg/event_indexes.hpp"
#include "pg/partition_bounds.hpp"

extern "C" {
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace outbox::pg {
namespace {

// outbox.events' columns, all of them: a partition with any other column needs the executor
// (its default).
enum Column {
  kSeq,
  kCreatedAt,
  kPartAt,
  kPublishedAt,
  kNextAttemptAt,
  kDeadAt,
  kAttempts,
  kId,
  kAggregatetype,
  kAggregateid,
  kType,
  kPayload,
  kHeaders,
  kLastError,
  kDiscardedAt,
  kColumns
};
constexpr std::array<const char*, kColumns> kNames = {
    "seq",     "created_at", "part_at", "published_at",  "next_attempt_at",
    "dead_at", "attempts",   "id",      "aggregatetype", "aggregateid",
    "type",    "payload",    "headers", "last_error",    "discarded_at"};

bool needs_executor(Relation rel) {
  return rel->trigdesc != nullptr || rel->rd_rel->relrowsecurity ||
         (rel->rd_att->constr != nullptr &&
          (rel->rd_att->constr->num_check > 0 || rel->rd_att->constr->has_generated_stored));
}

// Each attribute's column of outbox.events (-1: dropped); false when one is not outbox's.
bool map_columns(TupleDesc desc, int* columns) {
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    columns[i] = -1;
    if (att->attisdropped) continue;
    // Partitions made by outbox have the columns in this order: the match is one strcmp.
    if (i < kColumns && strcmp(NameStr(att->attname), kNames[i]) == 0) columns[i] = i;
    for (int c = 0; columns[i] < 0 && c < kColumns; ++c) {
      if (strcmp(NameStr(att->attname), kNames[c]) == 0) columns[i] = c;
    }
    if (columns[i] < 0) return false;
  }
  return true;
}

}  // namespace

bool insert_event_row(const EventRow& row) {
  // The errors an INSERT gives in a read-only transaction (a standby's too) and in a
  // parallel worker.
  PreventCommandIfReadOnly("INSERT");
  PreventCommandIfParallelMode("INSERT");
  const Oid nsp = get_namespace_oid("outbox", false);
  const Oid parent_oid = get_relname_relid("events", nsp);
  const Oid seq_oid = get_relname_relid("events_seq", nsp);
  if (!OidIsValid(parent_oid) || !OidIsValid(seq_oid)) return false;
  // The lock an INSERT into outbox.events takes, and its privilege check (the partitions'
  // are not checked when a row is routed to them).
  Relation parent = table_open(parent_oid, RowExclusiveLock);
  const AclResult acl = pg_class_aclcheck(parent_oid, GetUserId(), ACL_INSERT);
  if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(parent));
  const Oid part_oid = needs_executor(parent) ? InvalidOid : partition_for(parent, row.part_at);
  if (!OidIsValid(part_oid)) {
    table_close(parent, NoLock);
    return false;
  }
  Relation rel = table_open(part_oid, RowExclusiveLock);
  TupleDesc desc = RelationGetDescr(rel);
  int* columns = static_cast<int*>(palloc(sizeof(int) * desc->natts));
  if (rel->rd_rel->relkind != RELKIND_RELATION || needs_executor(rel) ||
      !map_columns(desc, columns)) {
    table_close(rel, NoLock);
    table_close(parent, NoLock);
    return false;
  }
  // outbox._next_seq(): the transaction's xid before the sequence value (low_water.cpp).
  (void)GetTopTransactionId();
  const int64 seq = nextval_internal(seq_oid, true);
  // By column (enum Column): the new row; published_at, next_attempt_at, dead_at, last_error,
  // discarded_at are NULL and attempts 0, as the table's defaults have them.
  const std::array<Datum, kColumns> value = {Int64GetDatum(seq),
                                             TimestampTzGetDatum(row.created_at),
                                             TimestampTzGetDatum(row.part_at),
                                             0,
                                             0,
                                             0,
                                             Int32GetDatum(0),
                                             row.id,
                                             row.aggregatetype,
                                             row.aggregateid,
                                             row.type,
                                             row.payload,
                                             row.headers,
                                             0,
                                             0};

  EState* estate = CreateExecutorState();
  ResultRelInfo* info = makeNode(ResultRelInfo);
  InitResultRelInfo(info, rel, 0, nullptr, 0);
  TupleTableSlot* slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
  for (int i = 0; i < desc->natts; ++i) {
    slot->tts_values[i] = columns[i] < 0 ? 0 : value[columns[i]];
    const int c = columns[i];
    slot->tts_isnull[i] = c < 0 || c == kPublishedAt || c == kNextAttemptAt || c == kDeadAt ||
                          c == kLastError || c == kDiscardedAt ||
                          (c == kHeaders && row.headers_null);
  }
  ExecStoreVirtualTuple(slot);
  open_event_indexes(info, slot->tts_isnull);
  table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, nullptr);
  if (info->ri_NumIndices > 0) insert_index_entries(info, slot, estate);
  ExecCloseIndices(info);
  ExecResetTupleTable(estate->es_tupleTable, false);
  FreeExecutorState(estate);
  table_close(rel, NoLock);
  table_close(parent, NoLock);
  // As after an INSERT run through SPI: the next command of this transaction (enqueue's own
  // lookup of a given id, in enqueue_batch) sees the row.
  CommandCounterIncrement();
  return true;
}

}  // namespace outbox::pg
