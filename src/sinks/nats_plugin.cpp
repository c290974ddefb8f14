// Entry point of outbox_sink_nats.so. Kept apart from nats_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_plugin_v1.
#include "sinks/nats_options.hpp"
#include "sinks/nats_sink.hpp"

namespace {
const outbox::sinks::PluginV1 kPlugin = {
    outbox::sinks::kAbiVersion, "nats", &outbox::sinks::create_nats_sink,
    outbox::sinks::kNatsOptions, outbox::sinks::kNatsOptionCount};
}  // namespace

extern "C" __attribute__((visibility("default"))) const outbox::sinks::PluginV1*
outbox_sink_plugin_v1(void) {
  return &kPlugin;
}
