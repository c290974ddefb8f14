// Entry point of outbox_sink_nats.so. Kept apart from nats_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_init.
#include "sinks/nats/nats_options.hpp"
#include "sinks/nats/nats_sink.hpp"
#include "sinks/common/plugin_export.hpp"

OUTBOX_EXPORT_SINK("nats", &outbox::sinks::create_nats_sink, outbox::sinks::kNatsOptions,
                   outbox::sinks::kNatsOptionCount)
