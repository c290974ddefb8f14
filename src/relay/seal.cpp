// Sealed partitions: the ones the relay need never read again, so that finding work costs
// what is pending, not what the history holds (docs/design.md, "Sealed partitions").
//
// A partition is sealed when no event in it is waiting (every one published or
// dead-lettered) and none can arrive: its range is past, a newer partition exists, and every
// transaction that could still route an event into it has ended. Then every query on
// outbox.events says part_at >= <the floor> with the floor as a literal, and the planner
// leaves the sealed partitions out of the plan: no lock, no index start-up.
//
// A round: the relay publishes the bound it wants to seal below (relay_publish_floor), from
// then on enqueue routes no event below it, and notes the transactions that run in this
// database. Once all of them have ended (prepared ones too: VirtualXactLock follows their
// xid), no event can arrive below the bound: the ones that read an older floor ran then.
// The partitions below the bound are then checked in order (their own indexes: above the
// mark, and the retries), and the floor moves up to the first one that still waits.
//
// Events that come back below the floor reset it: outbox.requeue() (it moves the
// configuration generation, as configure_sink does), a new extension; and a check of the
// sealed partitions now and then finds rows put there by other means (a restore into a
// running relay's database).
#include <algorithm>

#include "relay/seal.hpp"

#include "pg/boundary.hpp"
#include "pg/delivery_log.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"

extern "C" {
#include "access/table.h"
#include "catalog/partition.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace outbox::pg::relay {
namespace {

// How often a round moves on, and how often the sealed partitions are checked again.
constexpr int64 kSealCheckUs = 1000 * 1000;
constexpr int64 kSealAuditUs = 60 * 1000 * 1000;

// Whether a partition still holds a waiting event: above the mark and not in the delivery
// log, or due for a retry (index probes of the partition's own indexes, and of the log's).
constexpr const char* kWaitingSql =
    "SELECT EXISTS (SELECT 1 FROM %s e WHERE seq >= $1 AND published_at IS NULL "
    "                  AND dead_at IS NULL AND next_attempt_at IS NULL "
    "                  AND NOT " OUTBOX_IN_DELIVERY_LOG("e") ") "
    "    OR EXISTS (SELECT 1 FROM %s WHERE next_attempt_at IS NOT NULL "
    "                  AND published_at IS NULL AND dead_at IS NULL)";

}  // namespace

// The partitions of outbox.events with their bounds, by bound. (PostgreSQL calls run under
// guard() with no C++ object alive in them; the vectors are filled outside.)
std::vector<Sealer::Partition> Sealer::partitions() const {
  struct List {
    Partition* items;
    int count;
  };
  const List list = guard([] {
    List out{nullptr, 0};
    const Oid events = get_relname_relid("events", get_namespace_oid("outbox", false));
    if (!OidIsValid(events)) return out;
    Relation rel = table_open(events, AccessShareLock);
    PartitionDesc desc = RelationGetPartitionDesc(rel, true);
    PartitionBoundInfo bounds = desc->boundinfo;
    // With a default partition (made by hand), none: the predicate would hide its rows.
    if (bounds != nullptr && bounds->strategy == PARTITION_STRATEGY_RANGE &&
        bounds->default_index < 0) {
      out.items = static_cast<Partition*>(palloc(sizeof(Partition) * (bounds->ndatums + 1)));
      // indexes[i] is the partition whose range ends at datums[i] (-1: no partition there).
      for (int i = 0; i < bounds->ndatums; ++i) {
        const int part = bounds->indexes[i];
        if (part < 0) continue;
        Partition p{desc->oids[part], DT_NOBEGIN, DT_NOEND};
        if (bounds->kind[i][0] == PARTITION_RANGE_DATUM_VALUE) {
          p.upper = DatumGetTimestampTz(bounds->datums[i][0]);
        }
        if (i > 0 && bounds->kind[i - 1][0] == PARTITION_RANGE_DATUM_VALUE) {
          p.lower = DatumGetTimestampTz(bounds->datums[i - 1][0]);
        }
        out.items[out.count++] = p;
      }
    }
    table_close(rel, AccessShareLock);
    return out;
  });
  return std::vector<Partition>(list.items, list.items + list.count);
}

bool Sealer::waiting(Oid partition, int64 low_water) const {
  return guard([&] {
    const char* name = quote_qualified_identifier("outbox", get_rel_name(partition));
    Oid types[1] = {INT8OID};
    Datum params[1] = {Int64GetDatum(low_water)};
    if (SPI_execute_with_args(psprintf(kWaitingSql, name, name), 1, types, params, nullptr, false,
                              1) != SPI_OK_SELECT ||
        SPI_processed != 1) {
      elog(ERROR, "outbox relay: checking partition %s failed", name);
    }
    bool isnull;
    return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  });
}

void Sealer::advance(TimestampTz now, int64 low_water) {
  const uint32 generation = relay_database_generation(MyDatabaseId);
  if (generation != generation_) {
    // outbox.requeue() may have put an event back into a sealed partition.
    generation_ = generation;
    reset();
  }
  if (low_water < 0 || now - checked_at_ < kSealCheckUs) return;
  checked_at_ = now;
  if (floor_ != DT_NOBEGIN && now - audited_at_ >= kSealAuditUs) {
    audited_at_ = now;
    if (audit(low_water)) return;
  }
  if (target_ == DT_NOBEGIN) {
    start_round(now);
  } else {
    finish_round(low_water);
  }
}

// True when a sealed partition holds a waiting event (then nothing is sealed any more).
bool Sealer::audit(int64 low_water) {
  for (const Partition& p : partitions()) {
    if (p.upper > floor_ || !waiting(p.rel, low_water)) continue;
    guard([&] {
      ereport(LOG, (errmsg("outbox relay: partition %s holds events that were not there when "
                           "it was sealed; reading every partition again",
                           get_rel_name(p.rel))));
    });
    reset();
    return true;
  }
  return false;
}

void Sealer::start_round(TimestampTz now) {
  const std::vector<Partition> parts = partitions();
  // Past partitions, but never the newest: events are routed there when the clock passed
  // it (pg/enqueue.cpp).
  TimestampTz target = DT_NOBEGIN;
  next_end_ = DT_NOEND;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].upper <= now && parts[i].upper > floor_) target = parts[i].upper;
    if (parts[i].upper > now) next_end_ = std::min(next_end_, parts[i].upper);
  }
  if (target == DT_NOBEGIN) return;
  struct Running {
    VirtualTransactionId* vxids;
    int count;
  };
  const Running running = guard([&] {
    relay_publish_floor(MyDatabaseId, target);
    Running out{nullptr, 0};
    out.vxids =
        GetCurrentVirtualXIDs(InvalidTransactionId, false, false, PROC_IN_VACUUM, &out.count);
    return out;
  });
  running_.assign(running.vxids, running.vxids + running.count);
  target_ = target;
}

void Sealer::finish_round(int64 low_water) {
  // Ended, or still running (then later).
  std::vector<VirtualTransactionId> still;
  for (const VirtualTransactionId& vxid : running_) {
    if (!guard([&] { return VirtualXactLock(vxid, false); })) still.push_back(vxid);
  }
  running_.swap(still);
  if (!running_.empty()) return;
  TimestampTz sealed = floor_;
  for (const Partition& p : partitions()) {
    if (p.upper <= floor_) continue;
    if (p.upper > target_ || waiting(p.rel, low_water)) break;
    sealed = p.upper;
  }
  target_ = DT_NOBEGIN;
  if (sealed != floor_) seal(sealed);
}

void Sealer::seal(TimestampTz floor) {
  // A literal, so that the planner prunes: timestamptz_out's text reads back exactly in the
  // same session.
  const char* literal = guard([&] {
    const char* text =
        DatumGetCString(DirectFunctionCall1(timestamptz_out, TimestampTzGetDatum(floor)));
    ereport(DEBUG1, (errmsg("outbox relay: partitions below %s are sealed", text)));
    return static_cast<const char*>(quote_literal_cstr(text));
  });
  predicate_ = std::string(" AND part_at >= ") + literal + "::pg_catalog.timestamptz ";
  floor_ = floor;
  ++version_;
}

TimestampTz Sealer::idle_due() const {
  return target_ != DT_NOBEGIN ? checked_at_ + kSealCheckUs : next_end_;
}

void Sealer::reset() {
  target_ = DT_NOBEGIN;
  next_end_ = 0;
  running_.clear();
  if (floor_ == DT_NOBEGIN) return;
  floor_ = DT_NOBEGIN;
  ++version_;
  predicate_.clear();
}

}  // namespace outbox::pg::relay
