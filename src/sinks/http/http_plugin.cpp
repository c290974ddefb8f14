// Entry point of outbox_sink_http.so. Kept apart from http_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_init.
#include "sinks/http/http_options.hpp"
#include "sinks/http/http_sink.hpp"
#include "sinks/common/plugin_export.hpp"

OUTBOX_EXPORT_SINK("http", &outbox::sinks::create_http_sink, outbox::sinks::kHttpOptions,
                   outbox::sinks::kHttpOptionCount)
