/*
 * outbox_sink.h: the interface between outbox's relay and a sink, the library that hands
 * events to a broker. Plain C, stable across outbox versions; no PostgreSQL header is needed.
 *
 * Installed in $(pg_config --includedir-server)/extension/outbox/; example: examples/sink/.
 *
 * A sink named <name> is a shared library outbox_sink_<name>.so in $(pg_config --pkglibdir)
 * that exports
 *
 *     const OutboxSinkCallbacks *outbox_sink_init(void);
 *
 * returning a pointer to a static, constant table (magic, version, size, name, declared
 * options, callbacks). outbox.configure_sink('<name>', '{...}') loads it. The relay refuses,
 * with an error that says why, a table with a wrong magic, another major version, a size
 * smaller than version 1's, a name other than the library's, a missing required callback,
 * or a malformed option declaration.
 *
 * VERSIONS. OUTBOX_SINK_ABI_VERSION changes only when an existing field changes meaning
 * (a plugin built for another one is refused). New optional callbacks go at the end of
 * OutboxSinkCallbacks, read only when the plugin's `size` covers them.
 *
 * THREADS.
 *  - The relay calls every callback from one thread, a relay worker's main thread, one call
 *    at a time. create() runs with every signal blocked: threads a sink starts there inherit
 *    that mask, so PostgreSQL's signal handlers never run on them. The other callbacks run
 *    with the worker's normal mask: a sink that starts a thread inside them must block every
 *    signal in that thread first (pthread_sigmask before pthread_create, restored after).
 *  - host->keep_waiting() may be called only on the thread that is inside start() or
 *    finish(), while it is there. Any other call (another thread, or from create(),
 *    take_log() or destroy()) is refused: it returns 0 and the relay reports the broken rule.
 *  - A sink's own threads may write a started batch's outcomes until its finish() returns.
 *  - A sink never writes to stdout or stderr: log lines go through take_log().
 *
 * MEMORY. Every pointer the relay passes stays valid only for the call, except a batch's
 * messages and outcomes, which stay valid and in place from start() until finish() returns
 * for that batch, or destroy(). Strings are UTF-8, given as pointer + length, not
 * NUL-terminated. The sink owns its state (created in create(), freed in destroy()); the
 * relay owns everything it passes. Error texts are written by the sink into the relay's
 * buffers (NUL-terminated, truncated to their size); they must never hold a secret.
 *
 * FAILURES. A callback returns an OutboxSinkStatus; no C++ exception and no longjmp may
 * cross this interface.
 *  - A message not delivered is reported in its outcome: UNAVAILABLE (the broker could not
 *    be reached, a timeout: sent again later, no attempt counted), REJECTED (this message was
 *    refused: counts as an attempt; after outbox.max_attempts it becomes a dead letter), or
 *    DEFERRED (not sent because an earlier message of its key was not delivered; see ORDER).
 *  - OUTBOX_SINK_UNAVAILABLE from start() or finish(): the whole batch failed as UNAVAILABLE.
 *  - OUTBOX_SINK_CONFIG_ERROR: the options (from create()) or the broker's setup (from a
 *    batch: a subject no stream captures, say) are wrong. No attempt is counted; the relay
 *    reports the error in outbox.status and tries again after outbox.retry_backoff_max.
 *  - OUTBOX_SINK_FATAL: the sink cannot recover; the relay destroys it and creates a new one
 *    after a back-off. usable() returning 0 means the same between batches.
 *  - An outcome left at OUTBOX_DELIVERY_PENDING (or holding an unknown code) when a batch
 *    ends counts as UNAVAILABLE, and the relay reports that the sink broke the interface.
 *
 * ORDER. A message's key is (aggregatetype, aggregateid). Messages of a key are delivered in
 * the order given. Once a message is known not to be delivered, no later message of its key,
 * in the same batch or in a batch started after it while it is unfinished, may be delivered:
 * report those DEFERRED (or UNAVAILABLE). A sink whose broker can reject a message after it
 * was sent documents that the ones already on their way cannot be held back.
 */
#ifndef OUTBOX_SINK_H
#define OUTBOX_SINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OUTBOX_SINK_MAGIC 0x4f425331u /* "OBS1" */
#define OUTBOX_SINK_ABI_VERSION 1
#define OUTBOX_SINK_INIT_SYMBOL "outbox_sink_init"
/* Size of the error buffers the relay passes, NUL included. */
#define OUTBOX_SINK_ERROR_SIZE 512

typedef struct OutboxSinkString {
  const char* data;
  size_t len;
} OutboxSinkString;

typedef struct OutboxSinkHeader {
  OutboxSinkString name;
  OutboxSinkString value;
} OutboxSinkHeader;

/* One event. */
typedef struct OutboxSinkMessage {
  OutboxSinkString id;             /* the event id (UUID text): the same on every retry */
  OutboxSinkString aggregatetype;  /* routes to a topic, subject or URL */
  OutboxSinkString aggregateid;    /* the key: order holds per key */
  OutboxSinkString type;           /* the event type */
  OutboxSinkString payload;        /* JSON text */
  const OutboxSinkHeader* headers; /* the event's own headers */
  size_t header_count;
  int64_t created_at_unix_us; /* enqueue time, microseconds since 1970-01-01 UTC */
} OutboxSinkMessage;

typedef enum OutboxSinkDelivery {
  OUTBOX_DELIVERY_PENDING = 0, /* what the relay sets before a batch starts */
  OUTBOX_DELIVERY_ACKED = 1,   /* the broker has it: the relay marks the event published */
  OUTBOX_DELIVERY_UNAVAILABLE = 2,
  OUTBOX_DELIVERY_REJECTED = 3,
  OUTBOX_DELIVERY_DEFERRED = 4
} OutboxSinkDelivery;

typedef struct OutboxSinkOutcome {
  int32_t delivery;                   /* an OutboxSinkDelivery */
  char error[OUTBOX_SINK_ERROR_SIZE]; /* "" when acked; never a secret */
} OutboxSinkOutcome;

typedef enum OutboxSinkStatus {
  OUTBOX_SINK_OK = 0,
  OUTBOX_SINK_UNAVAILABLE = 1,
  OUTBOX_SINK_CONFIG_ERROR = 2,
  OUTBOX_SINK_FATAL = 3
} OutboxSinkStatus;

/*
 * What an option's value is. outbox.configure_sink and the relay check every option against
 * the sink's declaration before create() sees it: an undeclared option is refused.
 */
typedef enum OutboxSinkOptionKind {
  OUTBOX_OPTION_TEXT = 0,    /* passed as given */
  OUTBOX_OPTION_INTEGER = 1, /* a whole number, optionally negative */
  OUTBOX_OPTION_BOOLEAN = 2, /* "true" or "false" */
  /* A file inside outbox.sink_files_directory; create() receives its absolute real path. */
  OUTBOX_OPTION_FILE = 3,
  /*
   * Never given inline: the user gives <name>_file, a file inside outbox.sink_files_directory
   * that others cannot read or write, at most 64 KiB. create() receives <name> = its content
   * (one trailing newline stripped). Never shown in outbox.status, logs or errors.
   */
  OUTBOX_OPTION_SECRET = 4,
  /*
   * A file like OUTBOX_OPTION_FILE that holds key material (a private key, a credentials
   * file): it must also not be readable or writable by others. create() receives its path.
   */
  OUTBOX_OPTION_PRIVATE_FILE = 5
} OutboxSinkOptionKind;

typedef struct OutboxSinkOptionSpec {
  const char* name;        /* [a-z0-9._-], at most 63 bytes, unique */
  int32_t kind;            /* an OutboxSinkOptionKind */
  const char* description; /* one line, for the reference docs */
} OutboxSinkOptionSpec;

/* An option as create() receives it (resolved), NUL-terminated. */
typedef struct OutboxSinkOption {
  const char* name;
  const char* value;
} OutboxSinkOption;

/* What the relay offers a sink, given to create(); valid until destroy(). */
typedef struct OutboxSinkHost {
  uint32_t size; /* sizeof(OutboxSinkHost) in the relay's header */
  void* context;
  /*
   * A sink that waits for acknowledgements calls this at least every 100 ms while it waits,
   * on the thread inside start() or finish(), holding none of its own locks, with the client
   * library's latest error ("" or NULL when none): it shows in outbox.status at once. When it
   * returns 0 (shutdown, or a new configuration) the sink stops waiting: what is not
   * acknowledged yet is UNAVAILABLE with the error "not acknowledged: the relay stopped
   * waiting". It must not call back into the sink.
   */
  int (*keep_waiting)(void* context, const char* client_error);
} OutboxSinkHost;

/* Receives one log line in take_log(); level as syslog's (0 emergency .. 7 debug). */
typedef void (*OutboxSinkLogFn)(void* context, int level, const char* text);

typedef struct OutboxSinkCallbacks {
  uint32_t magic;       /* OUTBOX_SINK_MAGIC */
  uint32_t abi_version; /* OUTBOX_SINK_ABI_VERSION */
  uint32_t size;        /* sizeof(OutboxSinkCallbacks) */
  const char* name;     /* the <name> of outbox_sink_<name>.so */
  const OutboxSinkOptionSpec* options;
  size_t option_count;

  /* Required. */

  /*
   * Creates a sink from resolved options; sets *state. On failure returns CONFIG_ERROR (bad
   * options: the message says which, without its value if it looks sensitive) or
   * UNAVAILABLE, with a message in `error`; *state is then ignored.
   */
  int (*create)(const OutboxSinkOption* options, size_t option_count, const OutboxSinkHost* host,
                void** state, char* error, size_t error_size);
  /* Flushes what it can within a second or two, stops its threads, frees the state. */
  void (*destroy)(void* state);
  /*
   * Hands a batch over. Without finish(), it sends synchronously: it returns once every
   * outcome is set, within timeout_ms. With finish(), it may return at once; the relay keeps
   * at most two batches started and calls finish() for the oldest.
   */
  int (*start)(void* state, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes,
               size_t count, int64_t timeout_ms, char* error, size_t error_size);
  /* One line for logs and outbox.status: where it sends, never a credential. */
  void (*describe)(void* state, char* buffer, size_t size);

  /* Optional: NULL when not implemented. */

  /* Waits for the oldest started batch, at most until its start + timeout_ms. */
  int (*finish)(void* state, char* error, size_t error_size);
  /* 0 once the sink cannot recover by itself. NULL: always usable. */
  int (*usable)(void* state);
  /* The largest message (payload + key + headers) it can deliver, in bytes; 0: no limit. */
  uint64_t (*max_message_bytes)(void* state);
  /* Calls emit for each log line collected since the last call, oldest first. */
  void (*take_log)(void* state, OutboxSinkLogFn emit, void* emit_context);
} OutboxSinkCallbacks;

typedef const OutboxSinkCallbacks* (*OutboxSinkInitFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* OUTBOX_SINK_H */
