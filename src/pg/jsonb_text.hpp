// The text of a jsonb value, as jsonb_out (payload::text) writes it: the one way the relay
// turns a payload into the bytes it sends. Faster than the cast, whose escape_json appends
// one character at a time: the worker drains 15 % faster without the cast
// (bench/relay/README.md).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// Appends the text of `root` to buf: {"key": value, ...}, [a, b], a top-level scalar alone.
// PostgreSQL code: call it inside guard() (it allocates in the current memory context and
// frees what it allocated).
void append_jsonb_text(StringInfo buf, JsonbContainer* root);

}  // namespace outbox::pg
