// The relay's batches: what a fetch is asked to read and what it read, the rows it copies out
// of outbox.events, what the sink is handed, and what a pass's batches came to (relay.hpp
// lists the relay's parts).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/seq_set.hpp"
#include "core/shards.hpp"
#include "pg/postgres.hpp"
#include "pg/relay_stats.hpp"
#include "sinks/common/sink.hpp"

// What every fetch returns, in the order receive_row() (rows.cpp) reads it. The id comes as
// a uuid: the receiver writes the text of the rows it keeps only (a scan passes over other
// shards' rows in numbers).
#define OUTBOX_FETCH_COLUMNS                                                        \
  "SELECT tableoid, ctid, id, aggregatetype::text, aggregateid::text, type::text, " \
  "       payload, headers, attempts, created_at, seq, xmin "

namespace outbox::pg::relay {

// What the queries' scope is made of, each with its own version: the sealed partitions
// (Sealer::version()) and the owned shards (Ownership::version()). A plan made for another
// scope is made again.
struct ScopeVersions {
  uint64 sealed = 0;
  uint64 owned = 0;
  bool operator==(const ScopeVersions& other) const {
    return sealed == other.sealed && owned == other.owned;
  }
  bool operator!=(const ScopeVersions& other) const { return !(*this == other); }
};

// What a fetch reads (LowWater::request()): plain data, so that the mark and the queries
// meet only here and in FetchReport.
struct FetchRequest {
  int64 from;                      // new events from this seq up: the resume point, or the mark
  shards::Mask owned;              // the shards whose events are copied
  const std::vector<int64>* late;  // late events a probe of the gaps found: taken first
  const SeqSet* delivered;         // seqs the delivery log holds: passed over, not copied
  // What the queries add: the owned shards and the sealed partitions (scope), or the sealed
  // partitions alone (the scan of new events); plans made for another scope are made again.
  const std::string* scope;
  const std::string* sealed_scope;
  ScopeVersions scope_versions;
};

// What a fetch read besides its rows, for LowWater::account(): where each kind of row starts
// in the batch, and what the scan of new events passed over.
struct FetchReport {
  int late_from = 0;              // the late events, after the retries
  int new_from = 0;               // the new events, after the late ones
  bool late_tried = false;        // late events were looked for
  bool retries_cut = false;       // due retries were left for the next fetch
  const int64* others = nullptr;  // the events the scan passed over, sorted (palloc'd)
  int n_others = 0;
  int64 upto = 0;  // up to where the scan accounted for everything
};

struct Text {
  const char* data;
  int len;
  std::string_view view() const { return {data, static_cast<size_t>(len)}; }
};

// One fetched row. Its texts are copies in the batch's memory, valid until the batch has
// been marked. Trivially destructible.
struct Row {
  Oid rel;
  ItemPointerData tid;
  Text id, aggregatetype, aggregateid, type, payload;
  int nheaders;
  Text* header_keys;
  Text* header_values;
  int attempts;
  TimestampTz created_at;
  int64 seq;
  bool retried;  // fetched from the retry path: marked published on its row
};

struct Fetched {
  Row* rows;
  int count;
  bool full;  // stopped by batch_size or batch_max_bytes: more work is likely waiting
  // The WAL position up to which the commits of the rows' transactions must be flushed
  // before they are sent (InvalidXLogRecPtr: they are durable).
  XLogRecPtr commits_upto;
};

// One batch of the pipeline. Two of them live as long as the relay, so the sink's view of
// `outcomes` outlives any one transaction.
struct Batch {
  MemoryContext memory;  // rows, headers, detoasted values: reset once the batch is marked
  Fetched fetched{};
  std::vector<sinks::Message> messages;
  std::vector<sinks::Outcome> outcomes;
  bool in_flight = false;      // started, not finished
  TimestampTz started_at = 0;  // handed to the sink
  bool config_error = false;   // failed with a sinks::ConfigError
};

struct BatchResult {
  int batches = 0;
  int fetched = 0;
  bool full = false;
  int acked = 0;
  int rejected = 0;
  int dead = 0;
  // Unavailable in a batch that delivered nothing: the sink as a whole is in trouble.
  int unavailable = 0;
  // Unavailable in a batch that delivered others: put on the retry path, its key held.
  int transient = 0;
  int deferred = 0;  // not sent: an earlier event of its key failed (sinks::Delivery::kDeferred)
  // A deferred event stayed where it was (no rejected event of its key to wait behind).
  bool unresolved = false;
  // A batch was fetched but not sent: the wait for the synchronous standbys was given up.
  bool abandoned = false;
  // The first of each kind: later ones are mostly consequences (a batch purged because the
  // one before timed out).
  std::string first_rejection;
  std::string first_unavailable;
  std::string first_transient;
  bool config_error = false;  // the first unavailable one failed with a sinks::ConfigError
  RelayStatsDelta stats;      // added to the cumulative statistics once the pass committed
};

// rows.cpp: the executor's destination for a fetch. It copies each row into the batch's
// memory and stops the scan as soon as the batch is full, so that no row past
// outbox.batch_max_bytes is locked.
struct RowReceiver {
  DestReceiver dest;  // first: the executor holds a DestReceiver*
  Batch* batch;
  StringInfo scratch;  // where a payload's text is written before its fitted copy
  int limit;
  int64 bytes;  // payload and header bytes so far
  int64 max_bytes;
  TransactionId last_xmin;  // the last row's, whose commit LSN is counted
  // A scan of new events (Queue::scan_new): a row of a shard outside `owned`, one that does
  // not wait to be sent, or one `delivered` holds, is not copied; its seq goes to `others`.
  // Other fetches copy every row.
  bool scan;
  shards::Mask owned;
  const SeqSet* delivered;
  int64* others;  // room for every row the scan may return
  int n_others;
  int64 scanned;   // rows seen, copied or not
  int64 last_seq;  // the last row's seq
};
// Ready to receive up to `limit` rows into `batch`, counting on from `bytes`.
void init_row_receiver(RowReceiver& receiver, Batch& batch, StringInfo scratch, int limit,
                       int64 bytes, int64 max_bytes);
// Runs a fetch plan into `receiver` (nulls: NULL for none). Runs inside guard().
void run_into(SPIPlanPtr plan, int nparams, const Datum* values, const bool* nulls,
              const Oid* types, RowReceiver& receiver);
// The sink's view of the fetched rows: batch.messages, pointing into the rows.
void fill_messages(Batch& batch);

}  // namespace outbox::pg::relay
