// Entry point of outbox_sink_null.so. Kept apart from null_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_plugin_v1.
#include "sinks/null_sink.hpp"

namespace {
const outbox::sinks::PluginV1 kPlugin = {
    outbox::sinks::kAbiVersion, "null", &outbox::sinks::create_null_sink,
    outbox::sinks::kNullOptions, outbox::sinks::kNullOptionCount};
}  // namespace

extern "C" __attribute__((visibility("default"))) const outbox::sinks::PluginV1*
outbox_sink_plugin_v1(void) {
  return &kPlugin;
}
