// A fetch's rows, taken straight from the executor into the batch's memory (no SPI tuple
// table and no second copy). The payload comes as jsonb: its text is written here
// (pg/jsonb_text.hpp), byte for byte what payload::text gives, and faster.
#include <algorithm>

#include "relay/queue.hpp"

#include "core/uuid7.hpp"
#include "pg/jsonb_object.hpp"
#include "pg/jsonb_text.hpp"
#include "pg/shard_of.hpp"

extern "C" {
#include "utils/uuid.h"
}

namespace outbox::pg::relay {
namespace {

// A copy of len bytes in the current memory context; not NUL-terminated.
Text copy_bytes(const char* bytes, int len) {
  char* data = static_cast<char*>(palloc(len + 1));
  memcpy(data, bytes, len);
  return {data, len};
}

// The text of a uuid, in the current memory context.
Text uuid_copy(Datum value) {
  char* data = static_cast<char*>(palloc(kUuidTextLen + 1));
  uuid_text(DatumGetUUIDP(value)->data, *reinterpret_cast<char(*)[kUuidTextLen]>(data));
  return {data, kUuidTextLen};
}

// A copy of a text value in the current memory context; not NUL-terminated. A compressed
// or out-of-line value is expanded into that context, and then not copied again.
Text copy_text(Datum value) {
  text* t = DatumGetTextPP(value);
  const int len = static_cast<int>(VARSIZE_ANY_EXHDR(t));
  if (reinterpret_cast<Pointer>(t) != DatumGetPointer(value)) return {VARDATA_ANY(t), len};
  return copy_bytes(VARDATA_ANY(t), len);
}

// Headers are a flat object of strings (enqueue checked it). The texts point into the
// jsonb, copied into the current memory context. Returns their size, which counts toward
// outbox.batch_max_bytes like the payload's.
int64 copy_headers(Datum value, Row& row) {
  Jsonb* headers = DatumGetJsonbPCopy(value);
  const int n = JB_ROOT_COUNT(headers);
  const int64 bytes = VARSIZE(headers);
  row.header_keys = static_cast<Text*>(palloc(sizeof(Text) * (n + 1)));
  row.header_values = static_cast<Text*>(palloc(sizeof(Text) * (n + 1)));
  for_each_member(&headers->root, [&](const JsonbValue& key, const JsonbValue& v) {
    if (v.type == jbvString && row.nheaders < n) {
      row.header_keys[row.nheaders] = {key.val.string.val, key.val.string.len};
      row.header_values[row.nheaders++] = {v.val.string.val, v.val.string.len};
    }
    return true;
  });
  return bytes;
}

// The payload's text (what payload::text gives), copied into the current memory context.
// Written first into `scratch`, which the relay keeps: the copy is fitted, so the batch's
// memory is what outbox.batch_max_bytes counts.
Text payload_text(Datum value, StringInfo scratch) {
  Jsonb* payload = DatumGetJsonbP(value);
  resetStringInfo(scratch);
  append_jsonb_text(scratch, &payload->root);
  if (reinterpret_cast<Pointer>(payload) != DatumGetPointer(value)) pfree(payload);
  return copy_bytes(scratch->data, scratch->len);
}

// Called by the executor, inside guard(). The columns are those of every fetch
// (OUTBOX_FETCH_COLUMNS in batch.hpp), in that order, and for a scan of new events
// (kScanNewSql) whether the row waits to be sent.
bool receive_row(TupleTableSlot* slot, DestReceiver* self) {
  RowReceiver* receiver = reinterpret_cast<RowReceiver*>(self);
  Fetched& out = receiver->batch->fetched;
  slot_getallattrs(slot);
  const Datum* values = slot->tts_values;
  if (receiver->scan) {
    const int64 seq = DatumGetInt64(values[10]);
    ++receiver->scanned;
    receiver->last_seq = seq;
    if (!DatumGetBool(values[12]) || receiver->delivered->contains(seq) ||
        (receiver->owned != shards::kAll &&
         (receiver->owned & (shards::Mask{1} << shard_of(values[3], values[4]))) == 0)) {
      receiver->others[receiver->n_others++] = seq;
      return true;  // the scan's LIMIT ends it
    }
  }
  MemoryContext old = MemoryContextSwitchTo(receiver->batch->memory);
  Row& row = out.rows[out.count++];
  row.rel = DatumGetObjectId(values[0]);
  row.tid = *reinterpret_cast<ItemPointer>(DatumGetPointer(values[1]));
  row.id = uuid_copy(values[2]);
  row.aggregatetype = copy_text(values[3]);
  row.aggregateid = copy_text(values[4]);
  row.type = copy_text(values[5]);
  row.payload = payload_text(values[6], receiver->scratch);
  const int64 header_bytes = slot->tts_isnull[7] ? 0 : copy_headers(values[7], row);
  row.attempts = DatumGetInt32(values[8]);
  row.created_at = DatumGetTimestampTz(values[9]);
  row.seq = DatumGetInt64(values[10]);
  MemoryContextSwitchTo(old);
  // Where the WAL must be flushed for this row's commit to be durable (0: it is): the group
  // LSN of an asynchronous commit in the commit log, as hint bits use it. Rows of one
  // transaction come together.
  const TransactionId xmin = DatumGetTransactionId(values[11]);
  if (xmin != receiver->last_xmin) {
    receiver->last_xmin = xmin;
    out.commits_upto = std::max(out.commits_upto, TransactionIdGetCommitLSN(xmin));
  }
  receiver->bytes += row.payload.len + header_bytes;
  return out.count < receiver->limit && receiver->bytes < receiver->max_bytes;
}

void receiver_nothing(DestReceiver*) {}
void receiver_startup(DestReceiver*, int, TupleDesc) {}

}  // namespace

void init_row_receiver(RowReceiver& receiver, Batch& batch, StringInfo scratch, int limit,
                       int64 bytes, int64 max_bytes) {
  receiver = RowReceiver{};
  receiver.owned = shards::kAll;
  receiver.dest.receiveSlot = receive_row;
  receiver.dest.rStartup = receiver_startup;
  receiver.dest.rShutdown = receiver_nothing;
  receiver.dest.rDestroy = receiver_nothing;
  receiver.dest.mydest = DestNone;
  receiver.batch = &batch;
  receiver.scratch = scratch;
  receiver.limit = limit;
  receiver.bytes = bytes;
  receiver.max_bytes = max_bytes;
}

void run_into(SPIPlanPtr plan, int nparams, const Datum* values, const bool* nulls,
              const Oid* types, RowReceiver& receiver) {
  ParamListInfo params = makeParamList(nparams);
  for (int i = 0; i < nparams; ++i) {
    params->params[i] = {values[i], nulls != nullptr && nulls[i], PARAM_FLAG_CONST, types[i]};
  }
  SPIExecuteOptions options{};
  options.params = params;
  options.dest = &receiver.dest;
  if (SPI_execute_plan_extended(plan, &options) < 0) {
    elog(ERROR, "outbox relay: fetching events failed");
  }
}

void fill_messages(Batch& batch) {
  const Fetched& fetched = batch.fetched;
  batch.messages.resize(fetched.count);
  for (int i = 0; i < fetched.count; ++i) {
    const Row& row = fetched.rows[i];
    sinks::Message& m = batch.messages[i];
    m.id = row.id.view();
    m.aggregatetype = row.aggregatetype.view();
    m.aggregateid = row.aggregateid.view();
    m.type = row.type.view();
    m.payload = row.payload.view();
    m.created_at_unix_us =
        row.created_at +
        static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;
    m.headers.clear();
    for (int h = 0; h < row.nheaders; ++h) {
      m.headers.emplace_back(row.header_keys[h].view(), row.header_values[h].view());
    }
  }
}

}  // namespace outbox::pg::relay
