// Entry point of outbox_sink_kafka.so. Kept apart from kafka_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_plugin_v1.
#include "sinks/kafka_options.hpp"
#include "sinks/kafka_sink.hpp"

namespace {
const outbox::sinks::PluginV1 kPlugin = {
    outbox::sinks::kAbiVersion, "kafka", &outbox::sinks::create_kafka_sink,
    outbox::sinks::kKafkaOptions, outbox::sinks::kKafkaOptionCount};
}  // namespace

extern "C" __attribute__((visibility("default"))) const outbox::sinks::PluginV1*
outbox_sink_plugin_v1(void) {
  return &kPlugin;
}
