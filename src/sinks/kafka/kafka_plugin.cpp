// Entry point of outbox_sink_kafka.so. Kept apart from kafka_sink.cpp so that tests can link
// several sinks into one binary without two definitions of outbox_sink_init.
#include "sinks/kafka/kafka_options.hpp"
#include "sinks/kafka/kafka_sink.hpp"
#include "sinks/common/plugin_export.hpp"

OUTBOX_EXPORT_SINK("kafka", &outbox::sinks::create_kafka_sink, outbox::sinks::kKafkaOptions,
                   outbox::sinks::kKafkaOptionCount)
