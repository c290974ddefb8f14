// Entry point of outbox_sink_null.so. Kept apart from null_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_init.
#include "sinks/null/null_sink.hpp"
#include "sinks/common/plugin_export.hpp"

OUTBOX_EXPORT_SINK("null", &outbox::sinks::create_null_sink, outbox::sinks::kNullOptions,
                   outbox::sinks::kNullOptionCount)
