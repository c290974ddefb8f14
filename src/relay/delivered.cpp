// The delivery log read from the low-water mark up (docs/design.md, "The delivery log"):
// what a scan that starts again from the mark passes over (FetchRequest::delivered).
#include "relay/low_water.hpp"

#include "pg/boundary.hpp"
#include "relay/spi.hpp"

namespace outbox::pg::relay {
namespace {

// The runs of seqs the delivery log holds from the mark ($1) up (GiST index
// deliveries_seqs), [lo, hi), read by cursor kDeliveredChunk at a time.
constexpr const char* kDeliveredSql =
    "SELECT pg_catalog.lower(r), pg_catalog.upper(r) "
    "  FROM outbox.deliveries d, pg_catalog.unnest(d.seqs) AS r "
    " WHERE d.seqs OPERATOR(pg_catalog.&&) pg_catalog.int8range($1, NULL) "
    "   AND pg_catalog.upper(r) OPERATOR(pg_catalog.>) $1";
constexpr int kDeliveredChunk = 1024;

}  // namespace

// The delivery log from the mark up, when tracking restarted (at a start, after a restore
// all of it): by cursor, a chunk of runs at a time under guard(), kept outside it.
void LowWater::read_delivered() {
  std::vector<SeqSet::Interval> runs;
  Portal portal = guard([&] {
    if (delivered_plan_ == nullptr) {
      Oid types[1] = {INT8OID};
      delivered_plan_ = prepare_kept(kDeliveredSql, 1, types);
    }
    Datum params[1] = {Int64GetDatum(tracker_.mark())};
    return SPI_cursor_open(nullptr, delivered_plan_, params, nullptr, false);
  });
  for (;;) {
    struct Chunk {
      SeqSet::Interval* runs;
      uint64 count;
    };
    const Chunk chunk = guard([&] {
      SPI_cursor_fetch(portal, true, kDeliveredChunk);
      Chunk c{
          static_cast<SeqSet::Interval*>(palloc(sizeof(SeqSet::Interval) * (SPI_processed + 1))),
          SPI_processed};
      for (uint64 r = 0; r < c.count; ++r) {
        bool isnull;
        HeapTuple row = SPI_tuptable->vals[r];
        c.runs[r].lo = DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull));
        c.runs[r].hi = DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull)) - 1;
      }
      SPI_freetuptable(SPI_tuptable);
      return c;
    });
    runs.insert(runs.end(), chunk.runs, chunk.runs + chunk.count);
    guard([&] { pfree(chunk.runs); });
    if (chunk.count == 0) break;
  }
  guard([&] { SPI_cursor_close(portal); });
  tracker_.delivered_read(std::move(runs));
}

}  // namespace outbox::pg::relay
