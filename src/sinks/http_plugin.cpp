// Entry point of outbox_sink_http.so. Kept apart from http_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_plugin_v1.
#include "sinks/http_options.hpp"
#include "sinks/http_sink.hpp"

namespace {
const outbox::sinks::PluginV1 kPlugin = {
    outbox::sinks::kAbiVersion, "http", &outbox::sinks::create_http_sink,
    outbox::sinks::kHttpOptions, outbox::sinks::kHttpOptionCount};
}  // namespace

extern "C" __attribute__((visibility("default"))) const outbox::sinks::PluginV1*
outbox_sink_plugin_v1(void) {
  return &kPlugin;
}
