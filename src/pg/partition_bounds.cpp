// See partition_bounds.hpp.
#include "pg/partition_bounds.hpp"

extern "C" {
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "utils/partcache.h"
#include "utils/rel.h"
}

namespace outbox::pg {

Oid partition_for(Relation parent, TimestampTz at) {
  PartitionKey key = RelationGetPartitionKey(parent);
  PartitionDesc desc = RelationGetPartitionDesc(parent, true);
  PartitionBoundInfo bounds = desc->boundinfo;
  if (bounds == nullptr || key->strategy != PARTITION_STRATEGY_RANGE || key->partnatts != 1) {
    return InvalidOid;
  }
  Datum value = TimestampTzGetDatum(at);
  bool equal = false;
  const int offset = partition_range_datum_bsearch(key->partsupfunc, key->partcollation, bounds, 1,
                                                   &value, &equal);
  const int index = bounds->indexes[offset + 1];
  return index < 0 ? InvalidOid : desc->oids[index];
}

TimestampTz newest_upper(Relation parent) {
  PartitionDesc desc = RelationGetPartitionDesc(parent, true);
  PartitionBoundInfo bounds = desc->boundinfo;
  if (desc->nparts == 0 || bounds == nullptr || bounds->ndatums == 0) return DT_NOBEGIN;
  const int last = bounds->ndatums - 1;
  if (bounds->kind != nullptr && bounds->kind[last][0] != PARTITION_RANGE_DATUM_VALUE) {
    return DT_NOEND;  // a hand-made partition up to MAXVALUE
  }
  return DatumGetTimestampTz(bounds->datums[last][0]);
}

}  // namespace outbox::pg
