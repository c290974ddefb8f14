#include "pg/settings.hpp"

#include "pg/boundary.hpp"

namespace outbox::pg {

Settings settings = {
    /* max_payload_bytes */ 900 * 1024,
    /* max_headers_bytes */ 16 * 1024,
    /* partition_interval_s */ 24 * 60 * 60,
    /* retention_s */ 7 * 24 * 60 * 60,
    /* inbox_retention_s */ 7 * 24 * 60 * 60,
    /* premake */ 4,
    /* rotate_lock_timeout_ms */ 100,
    /* partition_fillfactor */ 100,
    /* database */ nullptr,
    /* workers */ 1,
    /* max_workers */ 4,
    /* max_databases */ 512,
    /* ordering */ kOrderingKey,
    /* batch_size */ 1000,
    /* batch_max_bytes */ 16 * 1024 * 1024,
    /* poll_interval_ms */ 1000,
    /* idle_check_interval_ms */ 30 * 1000,
    /* send_timeout_ms */ 30 * 1000,
    /* max_attempts */ 10,
    /* retry_backoff_min_ms */ 100,
    /* retry_backoff_max_ms */ 60 * 1000,
    /* wake_at_commit */ true,
    /* min_batch_interval_ms */ 50,
    /* replay_share */ 10,
    /* wait_for_sync_standbys */ false,
    /* sink_files_directory */ nullptr,
    /* drop_discards_events */ false,
    /* sink_isolation */ kSinkIsolationNone,
    /* inbox_require_binding */ false,
};

namespace {
const config_enum_entry kOrderingOptions[] = {
    {"key", kOrderingKey, false}, {"none", kOrderingNone, false}, {nullptr, 0, false}};
const config_enum_entry kSinkIsolationOptions[] = {{"process", kSinkIsolationProcess, false},
                                                   {"none", kSinkIsolationNone, false},
                                                   {nullptr, 0, false}};
}  // namespace

void define_settings() {
  DefineCustomIntVariable(
      "outbox.max_payload_bytes", "Largest payload outbox.enqueue accepts, in bytes of jsonb.",
      "Larger payloads are refused with SQLSTATE 54000. With outbox.max_headers_bytes it must "
      "stay below the sink's message size limit (librdkafka's message.max.bytes defaults to "
      "1000000 bytes); outbox.configure_sink warns when it does not.",
      &settings.max_payload_bytes, settings.max_payload_bytes, 1, MaxAllocSize - 1, PGC_SUSET,
      GUC_UNIT_BYTE, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.max_headers_bytes",
      "Largest headers object outbox.enqueue accepts, in bytes of jsonb.",
      "Larger headers are refused with SQLSTATE 54000. Headers travel with every message and "
      "count toward outbox.batch_max_bytes.",
      &settings.max_headers_bytes, settings.max_headers_bytes, 0, MaxAllocSize - 1, PGC_SUSET,
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
      "outbox.inbox_retention",
      "How long the consumer's inbox remembers an event, by the event's time.",
      "outbox.rotate() drops an inbox partition once its whole range is older than this; a "
      "copy of an event that old then counts as new. 0 keeps every partition.",
      &settings.inbox_retention_s, settings.inbox_retention_s, 0, INT_MAX, PGC_SUSET, GUC_UNIT_S,
      nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "outbox.inbox_require_binding",
      "Refuse inbox_receive for a consumer name that is bound to no role.",
      "Off: a name that outbox.bind_inbox_consumer has not bound may be used by any role granted "
      "inbox_receive. On: every consumer name must be bound first.",
      &settings.inbox_require_binding, settings.inbox_require_binding, PGC_SUSET, 0, nullptr,
      nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.premake", "How many future partitions outbox.rotate() keeps ready.", nullptr,
      &settings.premake, settings.premake, 1, 1000, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.rotate_lock_timeout", "How long outbox.rotate() waits for each lock it takes.",
      "While it waits, new writers queue behind it, so keep this short. If a lock is not "
      "granted in time that part is skipped with a NOTICE and left for the next run. 0 means "
      "NOWAIT: never queue, try once.",
      &settings.rotate_lock_timeout_ms, settings.rotate_lock_timeout_ms, 0, 60 * 1000, PGC_SUSET,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.partition_fillfactor", "Fillfactor of new partitions, in percent.",
      "Delivery writes no event row (the delivery log), so pages can be full; a lower value "
      "leaves room for the rare rows a retry or a dead letter updates in place.",
      &settings.partition_fillfactor, settings.partition_fillfactor, 10, 100, PGC_SUSET, 0, nullptr,
      nullptr, nullptr);

  DefineCustomIntVariable(
      "outbox.batch_size", "Most events the relay sends in one batch.",
      "Bigger batches cost fewer commits: the article measured 1.6k rows/s at 1 and 105k at "
      "1000.",
      &settings.batch_size, settings.batch_size, 1, 100000, PGC_SIGHUP, 0, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "outbox.batch_max_bytes", "Most payload bytes the relay holds in one batch.",
      "A batch ends at outbox.batch_size events or at this many bytes, whichever comes first; "
      "it bounds the relay's memory.",
      &settings.batch_max_bytes, settings.batch_max_bytes, 1024, MaxAllocSize - 1, PGC_SIGHUP,
      GUC_UNIT_BYTE, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.poll_interval", "How often an idle relay looks for work without being woken.",
      "Commits that enqueued wake the relay at once; this poll is the fallback (and what "
      "picks up retries whose time has come). An idle relay does not poll: it sleeps until a "
      "commit wakes it or outbox.idle_check_interval.",
      &settings.poll_interval_ms, settings.poll_interval_ms, 10, 3600 * 1000, PGC_SIGHUP,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.idle_check_interval", "How often an idle relay reads the queue when nothing woke it.",
      "An idle relay sleeps until a commit that wrote events through outbox's functions, or "
      "something due, wakes it; this slower poll finds rows written by other means (a plain "
      "INSERT, COPY, a restore). 0: every outbox.poll_interval reads the queue.",
      &settings.idle_check_interval_ms, settings.idle_check_interval_ms, 0, 3600 * 1000, PGC_SIGHUP,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.send_timeout", "How long the relay waits for the sink to acknowledge a batch.",
      "Unacknowledged events count as a sink outage and are sent again after a back-off.",
      &settings.send_timeout_ms, settings.send_timeout_ms, 100, 3600 * 1000, PGC_SIGHUP,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.max_attempts", "Rejections after which an event is dead-lettered.",
      "Only per-event rejections count (message too large, refused); a broker outage does "
      "not burn attempts.",
      &settings.max_attempts, settings.max_attempts, 1, 1000000, PGC_SIGHUP, 0, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable("outbox.retry_backoff_min", "First back-off after a failure.", nullptr,
                          &settings.retry_backoff_min_ms, settings.retry_backoff_min_ms, 1,
                          3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.retry_backoff_max", "Longest back-off after repeated failures.",
      "Back-off doubles from outbox.retry_backoff_min up to this; after a sink outage, with "
      "random jitter.",
      &settings.retry_backoff_max_ms, settings.retry_backoff_max_ms, 1, 24 * 3600 * 1000,
      PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);

  DefineCustomIntVariable(
      "outbox.min_batch_interval", "The longest a batch waits for commits to gather.",
      "A batch per commit while that costs the relay less than a quarter of a core (its "
      "measured CPU per batch); beyond that commits gather for the measured cost / 0.25, at "
      "most this long. A full batch never waits. 0 disables gathering.",
      &settings.min_batch_interval_ms, settings.min_batch_interval_ms, 0, 1000, PGC_SIGHUP,
      GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "outbox.replay_share",
      "Share of the time, in percent, the replay worker may keep a core busy while live events "
      "flow.",
      "While the database's relays have sent a batch within the last second, the replay worker "
      "waits after each of its batches so that its CPU time is at most this share of the time: "
      "a core kept busy slows the live events' commits and WAL flushes. Waiting for the "
      "destination does not count. With no live events it runs at full speed. 100 never waits.",
      &settings.replay_share, settings.replay_share, 1, 100, PGC_SIGHUP, 0, nullptr, nullptr,
      nullptr);
  DefineCustomBoolVariable(
      "outbox.wait_for_sync_standbys",
      "Publish an event only once the synchronous standbys have flushed its commit.",
      "Every event is published only once its commit is flushed to the local WAL. With this on, "
      "the relay also waits until the standbys named by synchronous_standby_names have flushed "
      "it, so that a failover to one of them never leaves consumers holding events the new "
      "primary lacks. Without synchronous standbys configured it waits for nothing more.",
      &settings.wait_for_sync_standbys, settings.wait_for_sync_standbys, PGC_SIGHUP, 0, nullptr,
      nullptr, nullptr);
  DefineCustomStringVariable(
      "outbox.sink_files_directory",
      "Directory that sink options naming files (certificates, keytabs, secrets) must point into.",
      "outbox.configure_sink refuses a file outside it, and reads secrets (options ending in "
      "_file) only from it. Empty: no sink option may name a file.",
      &settings.sink_files_directory, "", PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  DefineCustomEnumVariable(
      "outbox.sink_isolation", "Where the relay runs its sink's client library.",
      "process: in a child process of the relay (outbox_sink_host), so that a crash of the "
      "library (librdkafka, a third-party sink) ends that process, not the relay, and "
      "PostgreSQL does not restart; the relay reports it and starts a new one. none: inside "
      "the relay. Applies to sinks created after a reload, and to outbox.configure_sink's check.",
      &settings.sink_isolation, settings.sink_isolation, kSinkIsolationOptions, PGC_SIGHUP, 0,
      nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "outbox.drop_discards_events",
      "Let DROP EXTENSION outbox discard events that are not published yet.",
      "Off: DROP EXTENSION outbox is refused while unpublished or dead-lettered events remain. "
      "Set it with SET LOCAL in the transaction that drops the extension.",
      &settings.drop_discards_events, settings.drop_discards_events, PGC_SUSET, 0, nullptr, nullptr,
      nullptr);
  DefineCustomBoolVariable(
      "outbox.wake_at_commit", "Wake the relay when a transaction that enqueued commits.",
      "Off leaves only the outbox.poll_interval fallback (for measurements).",
      &settings.wake_at_commit, settings.wake_at_commit, PGC_SUSET, 0, nullptr, nullptr, nullptr);

  // PostgreSQL allows PGC_POSTMASTER settings only while preloading; without preloading
  // there is no relay for them to configure.
  if (process_shared_preload_libraries_in_progress) {
    DefineCustomStringVariable(
        "outbox.database", "Restricts the relay to one database.",
        "Empty (the default): relays run in every database that has the extension. Needs a "
        "restart.",
        &settings.database, "", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("outbox.workers", "Number of relay workers in each database.",
                            "Events of one key keep their order with any number. 0 disables "
                            "the relay. Needs a restart.",
                            &settings.workers, settings.workers, 0, kMaxWorkers, PGC_POSTMASTER, 0,
                            nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "outbox.max_workers", "Most relay workers in the whole cluster.",
        "Each takes a background-worker slot (max_worker_processes), and the launcher one more. "
        "Every database with the extension gets one before any gets a second. Needs a restart.",
        &settings.max_workers, settings.max_workers, 0, kMaxRelaySlots, PGC_POSTMASTER, 0, nullptr,
        nullptr, nullptr);
    DefineCustomIntVariable(
        "outbox.max_databases", "Most databases with the extension that get relays.",
        "Databases without the extension take none. One past it gets no relay until one of "
        "them drops the extension or is dropped; outbox.status there says so. Needs a restart.",
        &settings.max_databases, settings.max_databases, 1, 65536, PGC_POSTMASTER, 0, nullptr,
        nullptr, nullptr);
    DefineCustomEnumVariable(
        "outbox.ordering", "Retired: the relay keeps the order of each key's events.",
        "Keys hash to 64 shards, each sent by one worker at a time, and a retrying event holds "
        "back the later events of its key. none, the unordered mode until 0.6.0, is accepted "
        "with a WARNING and means key.",
        &settings.ordering, settings.ordering, kOrderingOptions, PGC_POSTMASTER, 0, nullptr,
        nullptr, nullptr);
  }

  MarkGUCPrefixReserved("outbox");
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
    Datum values[5] = {Int32GetDatum(settings.partition_interval_s),
                       Int32GetDatum(settings.retention_s), Int32GetDatum(settings.premake),
                       Int32GetDatum(settings.rotate_lock_timeout_ms),
                       Int32GetDatum(settings.partition_fillfactor)};
    bool nulls[5] = {false, false, false, false, false};
    // The 0.1.0 definition, which CREATE EXTENSION runs before updating, has 4 columns.
    if (desc->natts != 4 && desc->natts != 5) {
      elog(ERROR,
           "outbox._partition_settings: unexpected result type; run ALTER EXTENSION outbox UPDATE");
    }
    return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
  });
}

// outbox._inbox_retention(): outbox.inbox_retention in seconds, for outbox.rotate_inbox().
OUTBOX_FUNCTION(outbox_inbox_retention) {
  (void)fcinfo;
  return Int32GetDatum(outbox::pg::settings.inbox_retention_s);
}
