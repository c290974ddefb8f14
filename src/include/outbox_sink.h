/*
 * outbox_sink.h: the interface between outbox's relay and a sink, the library that hands
 * events to a broker. Plain C, no PostgreSQL header. The contract (threads, memory, failures,
 * order, versions) is docs/writing-a-sink.md; examples/sink/ is a working sink.
 *
 * A sink <name> is outbox_sink_<name>.so in $(pg_config --pkglibdir), exporting
 *
 *     const OutboxSinkCallbacks *outbox_sink_init(void);
 *
 * which returns a static, constant table. Its size fields say which layout the sink was built
 * against, so that messages, outcomes and the table itself can grow without a new version.
 */
#ifndef OUTBOX_SINK_H
#define OUTBOX_SINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OUTBOX_SINK_MAGIC 0x4f425331u /* "OBS1" */
#define OUTBOX_SINK_ABI_VERSION 2
#define OUTBOX_SINK_INIT_SYMBOL "outbox_sink_init"
/* Size of the error buffers of create(), start() and finish(), NUL included. */
#define OUTBOX_SINK_ERROR_SIZE 512

typedef struct OutboxSinkString {
  const char* data; /* UTF-8, not NUL-terminated */
  size_t len;
} OutboxSinkString;

typedef struct OutboxSinkHeader {
  OutboxSinkString name;
  OutboxSinkString value;
} OutboxSinkHeader;

/* One event. Fields added later go at the end; a sink built before them never sees them. */
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
  OUTBOX_DELIVERY_PENDING = 0, /* as the relay hands the outcome over */
  OUTBOX_DELIVERY_ACKED = 1,   /* the broker has it */
  OUTBOX_DELIVERY_UNAVAILABLE = 2,
  OUTBOX_DELIVERY_REJECTED = 3,
  OUTBOX_DELIVERY_DEFERRED = 4
} OutboxSinkDelivery;

/* One message's outcome, set by the sink. */
typedef struct OutboxSinkOutcome {
  int32_t delivery; /* an OutboxSinkDelivery */
  /*
   * Why it was not acked (NULL when acked), UTF-8, never a secret. The sink's memory: it
   * stays valid until the sink's next callback after the batch ended (the relay copies it).
   */
  const char* error;
  size_t error_len;
} OutboxSinkOutcome;

typedef enum OutboxSinkStatus {
  OUTBOX_SINK_OK = 0,
  OUTBOX_SINK_UNAVAILABLE = 1,
  OUTBOX_SINK_CONFIG_ERROR = 2,
  OUTBOX_SINK_FATAL = 3
} OutboxSinkStatus;

/* What an option's value is; checked by the relay before create() sees it. */
typedef enum OutboxSinkOptionKind {
  OUTBOX_OPTION_TEXT = 0,
  OUTBOX_OPTION_INTEGER = 1,
  OUTBOX_OPTION_BOOLEAN = 2,      /* "true" or "false" */
  OUTBOX_OPTION_FILE = 3,         /* in outbox.sink_files_directory: its absolute real path */
  OUTBOX_OPTION_SECRET = 4,       /* given as <name>_file: create() receives the content */
  OUTBOX_OPTION_PRIVATE_FILE = 5, /* a FILE that others may not read: a key, credentials */
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
   * Called at least every 100 ms while the sink waits, on the thread inside start() or
   * finish(), with the client library's latest error ("" or NULL). 0: stop waiting.
   */
  int (*keep_waiting)(void* context, const char* client_error);
} OutboxSinkHost;

/* Receives one log line in take_log(); level as syslog's (0 emergency .. 7 debug). */
typedef void (*OutboxSinkLogFn)(void* context, int level, const char* text);

typedef struct OutboxSinkCallbacks {
  uint32_t magic;        /* OUTBOX_SINK_MAGIC */
  uint32_t abi_version;  /* OUTBOX_SINK_ABI_VERSION */
  uint32_t size;         /* sizeof(OutboxSinkCallbacks) */
  uint32_t message_size; /* sizeof(OutboxSinkMessage): the stride of start()'s messages */
  uint32_t outcome_size; /* sizeof(OutboxSinkOutcome): the stride of start()'s outcomes */
  const char* name;      /* the <name> of outbox_sink_<name>.so */
  const OutboxSinkOptionSpec* options;
  size_t option_count;

  /* Required. */
  int (*create)(const OutboxSinkOption* options, size_t option_count, const OutboxSinkHost* host,
                void** state, char* error, size_t error_size);
  void (*destroy)(void* state);
  /* Synchronous without finish(): returns with every outcome set, within timeout_ms. */
  int (*start)(void* state, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes,
               size_t count, int64_t timeout_ms, char* error, size_t error_size);
  void (*describe)(void* state, char* buffer, size_t size); /* never a credential */

  /* Optional: NULL when not implemented. */
  int (*finish)(void* state, char* error, size_t error_size); /* the oldest started batch */
  int (*usable)(void* state);                                 /* 0: recreate me */
  uint64_t (*max_message_bytes)(void* state);                 /* 0: no limit */
  void (*take_log)(void* state, OutboxSinkLogFn emit, void* emit_context);
} OutboxSinkCallbacks;

typedef const OutboxSinkCallbacks* (*OutboxSinkInitFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* OUTBOX_SINK_H */
