// A built-in sink's side of the C sink interface (src/include/outbox_sink.h): exports a C++
// Sink through the C callbacks, so that no C++ type or exception crosses the library boundary.
// A sink library's entry point is one line:
//
//     OUTBOX_EXPORT_SINK("null", &outbox::sinks::create_null_sink, kNullOptions, kNullOptionCount)
//
// in a file of its own (kept apart from the sink, so that tests can link several sinks into one
// binary). Exceptions become statuses: ConfigError -> OUTBOX_SINK_CONFIG_ERROR, any other ->
// OUTBOX_SINK_UNAVAILABLE; none escapes a callback.
#pragma once

#include <cstddef>
#include <vector>

#include "include/outbox_sink.h"
#include "sinks/common/sink.hpp"

namespace outbox::sinks::plugin_export {

// The callbacks, given the sink's create function; defined in plugin_export.cpp.
int create(CreateFn create_fn, const OutboxSinkOption* options, std::size_t option_count,
           const OutboxSinkHost* host, void** state, char* error, std::size_t error_size);
void destroy(void* state);
int start(void* state, const OutboxSinkMessage* messages, OutboxSinkOutcome* outcomes,
          std::size_t count, std::int64_t timeout_ms, char* error, std::size_t error_size);
int finish(void* state, char* error, std::size_t error_size);
void describe(void* state, char* buffer, std::size_t size);
int usable(void* state);
std::uint64_t max_message_bytes(void* state);
void take_log(void* state, OutboxSinkLogFn emit, void* emit_context);

// The C option table for a C++ one (OptionKind's values are the C kinds).
std::vector<OutboxSinkOptionSpec> option_table(const OptionSpec* specs, std::size_t count);

// The table of one sink: the create callback is bound to `Create` at compile time, since the C
// create() has no context argument.
template <CreateFn Create>
const OutboxSinkCallbacks* callbacks(const char* name, const OptionSpec* specs, std::size_t count) {
  // Function-local statics: built when the relay first loads the library, freed when it is
  // unloaded.
  static const std::vector<OutboxSinkOptionSpec> options = option_table(specs, count);
  static const OutboxSinkCallbacks table = {
      OUTBOX_SINK_MAGIC,
      OUTBOX_SINK_ABI_VERSION,
      sizeof(OutboxSinkCallbacks),
      sizeof(OutboxSinkMessage),
      sizeof(OutboxSinkOutcome),
      name,
      options.data(),
      options.size(),
      [](const OutboxSinkOption* options, std::size_t option_count, const OutboxSinkHost* host,
         void** state, char* error, std::size_t error_size) {
        return create(Create, options, option_count, host, state, error, error_size);
      },
      &destroy,
      &start,
      &describe,
      &finish,
      &usable,
      &max_message_bytes,
      &take_log,
  };
  return &table;
}

}  // namespace outbox::sinks::plugin_export

#define OUTBOX_EXPORT_SINK(NAME, CREATE, SPECS, COUNT)                                           \
  extern "C" __attribute__((visibility("default"))) const OutboxSinkCallbacks* outbox_sink_init( \
      void) {                                                                                    \
    return outbox::sinks::plugin_export::callbacks<CREATE>(NAME, SPECS, COUNT);                  \
  }
