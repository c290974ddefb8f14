#include "pg/settings.hpp"

#include "pg/boundary.hpp"

namespace outbox::pg {

Settings settings = {
    /* max_payload_bytes */ 1024 * 1024,
    /* partition_interval_s */ 24 * 60 * 60,
    /* retention_s */ 7 * 24 * 60 * 60,
    /* premake */ 4,
    /* rotate_lock_timeout_ms */ 100,
};

void define_settings() {
  DefineCustomIntVariable(
      "outbox.max_payload_bytes", "Largest payload outbox.enqueue accepts, in bytes of jsonb.",
      "Larger payloads are refused with SQLSTATE 54000. Keep it below the broker's message "
      "size limit (Kafka's message.max.bytes defaults to about 1 MB).",
      &settings.max_payload_bytes, settings.max_payload_bytes, 1, MaxAllocSize - 1, PGC_SUSET,
      GUC_UNIT_BYTE, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.partition_interval", "Time span of one partition of outbox.events.",
      "Partitions are aligned to multiples of this span since the Unix epoch (UTC). A change "
      "applies to partitions that outbox.rotate() makes from then on.",
      &settings.partition_interval_s, settings.partition_interval_s, 1, INT_MAX, PGC_SUSET,
      GUC_UNIT_S, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.retention", "How long published events are kept: how far back you can replay.",
      "outbox.rotate() drops a partition once its whole range is older than this and it "
      "holds no unpublished event. 0 keeps every partition.",
      &settings.retention_s, settings.retention_s, 0, INT_MAX, PGC_SUSET, GUC_UNIT_S, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.premake", "How many future partitions outbox.rotate() keeps ready.", nullptr,
      &settings.premake, settings.premake, 1, 1000, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.rotate_lock_timeout",
      "How long outbox.rotate() waits for the lock it needs to drop partitions.",
      "While it waits, new writers queue behind it, so keep this short. If the lock is not "
      "granted in time the drop is skipped with a NOTICE and left for the next run. 0 means "
      "NOWAIT: never queue, try once.",
      &settings.rotate_lock_timeout_ms, settings.rotate_lock_timeout_ms, 0, 60 * 1000, PGC_SUSET,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);

#if PG_VERSION_NUM >= 150000
  MarkGUCPrefixReserved("outbox");
#else
  EmitWarningsOnPlaceholders("outbox");
#endif
}

}  // namespace outbox::pg

// outbox._partition_settings(): the rotation settings as one row, for outbox.rotate().
// Calling it also loads the library, so the settings exist even in a fresh session.
OUTBOX_FUNCTION(outbox_partition_settings) {
  using outbox::pg::settings;
  return outbox::pg::guard([&]() -> Datum {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
      elog(ERROR, "outbox._partition_settings must return a record");
    }
    desc = BlessTupleDesc(desc);
    Datum values[4] = {Int32GetDatum(settings.partition_interval_s),
                       Int32GetDatum(settings.retention_s), Int32GetDatum(settings.premake),
                       Int32GetDatum(settings.rotate_lock_timeout_ms)};
    bool nulls[4] = {false, false, false, false};
    return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
  });
}
