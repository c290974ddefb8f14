/*
 * An outbox sink in plain C, built out of tree against the installed outbox_sink.h: it
 * appends each event to a file as one JSON line and acknowledges it once the line is on disk
 * (fsync). It shows the whole interface: declared options (one of them a file), create and
 * destroy, a synchronous start (no finish), describe, and outcomes per message.
 *
 *   make PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config && sudo make install
 *   SELECT outbox.configure_sink('file', '{"path": "events.jsonl"}');
 *
 * path is a file inside outbox.sink_files_directory that exists (the relay resolves it).
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox_sink.h"

typedef struct FileSink {
  FILE *out;
  char path[4096];
  int fsync_each_batch;
} FileSink;

static const OutboxSinkOptionSpec options[] = {
    {"path", OUTBOX_OPTION_FILE, "the file the events are appended to (required)"},
    {"fsync", OUTBOX_OPTION_BOOLEAN, "true (default): each batch is on disk before it is acked"},
};

static void write_string(FILE *out, OutboxSinkString s) {
  fputc('"', out);
  for (size_t i = 0; i < s.len; ++i) {
    unsigned char c = (unsigned char)s.data[i];
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
    } else if (c < 0x20) {
      fprintf(out, "\\u%04x", c);
    } else {
      fputc(c, out);
    }
  }
  fputc('"', out);
}

static void write_message(FILE *out, const OutboxSinkMessage *m) {
  fputs("{\"id\":", out);
  write_string(out, m->id);
  fputs(",\"aggregatetype\":", out);
  write_string(out, m->aggregatetype);
  fputs(",\"aggregateid\":", out);
  write_string(out, m->aggregateid);
  fputs(",\"type\":", out);
  write_string(out, m->type);
  fputs(",\"headers\":{", out);
  for (size_t h = 0; h < m->header_count; ++h) {
    if (h > 0) fputc(',', out);
    write_string(out, m->headers[h].name);
    fputc(':', out);
    write_string(out, m->headers[h].value);
  }
  fprintf(out, "},\"created_at_unix_us\":%lld,\"payload\":", (long long)m->created_at_unix_us);
  fwrite(m->payload.data, 1, m->payload.len, out); /* already JSON */
  fputs("}\n", out);
}

static int file_create(const OutboxSinkOption *opts, size_t count, const OutboxSinkHost *host,
                       void **state, char *error, size_t error_size) {
  const char *path = NULL;
  int fsync_each_batch = 1;
  (void)host; /* this sink never waits for anyone */
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(opts[i].name, "path") == 0) path = opts[i].value;
    if (strcmp(opts[i].name, "fsync") == 0) fsync_each_batch = strcmp(opts[i].value, "true") == 0;
  }
  if (path == NULL) {
    snprintf(error, error_size, "path is required");
    return OUTBOX_SINK_CONFIG_ERROR;
  }
  FileSink *sink = calloc(1, sizeof(FileSink));
  if (sink == NULL) {
    snprintf(error, error_size, "out of memory");
    return OUTBOX_SINK_UNAVAILABLE;
  }
  sink->out = fopen(path, "a");
  if (sink->out == NULL) {
    snprintf(error, error_size, "cannot open %s: %s", path, strerror(errno));
    free(sink);
    return OUTBOX_SINK_CONFIG_ERROR;
  }
  snprintf(sink->path, sizeof(sink->path), "%s", path);
  sink->fsync_each_batch = fsync_each_batch;
  *state = sink;
  return OUTBOX_SINK_OK;
}

static void file_destroy(void *state) {
  FileSink *sink = state;
  fclose(sink->out);
  free(sink);
}

/* Synchronous: every outcome is set when it returns. A batch is written whole or not acked. */
static int file_start(void *state, const OutboxSinkMessage *messages, OutboxSinkOutcome *outcomes,
                      size_t count, int64_t timeout_ms, char *error, size_t error_size) {
  FileSink *sink = state;
  (void)timeout_ms;
  for (size_t i = 0; i < count; ++i) write_message(sink->out, &messages[i]);
  if (fflush(sink->out) != 0 || (sink->fsync_each_batch && fsync(fileno(sink->out)) != 0)) {
    /* The whole batch is sent again later: a reader may see some lines twice. */
    snprintf(error, error_size, "writing %s: %s", sink->path, strerror(errno));
    clearerr(sink->out);
    return OUTBOX_SINK_UNAVAILABLE;
  }
  for (size_t i = 0; i < count; ++i) outcomes[i].delivery = OUTBOX_DELIVERY_ACKED;
  return OUTBOX_SINK_OK;
}

static void file_describe(void *state, char *buffer, size_t size) {
  FileSink *sink = state;
  snprintf(buffer, size, "file %s", sink->path);
}

static const OutboxSinkCallbacks callbacks = {
    .magic = OUTBOX_SINK_MAGIC,
    .abi_version = OUTBOX_SINK_ABI_VERSION,
    .size = sizeof(OutboxSinkCallbacks),
    .message_size = sizeof(OutboxSinkMessage),
    .outcome_size = sizeof(OutboxSinkOutcome),
    .name = "file",
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .create = file_create,
    .destroy = file_destroy,
    .start = file_start,
    .describe = file_describe,
    /* finish, usable, max_message_bytes, take_log: not needed, left NULL */
};

__attribute__((visibility("default"))) const OutboxSinkCallbacks *outbox_sink_init(void) {
  return &callbacks;
}
