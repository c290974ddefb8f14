// The null sink: acknowledges every message at once, sends nothing anywhere. For benchmarks
// (it measures the relay alone) and tests.
//
// Options:
//   fail_every   N >= 1: every Nth message this sink instance sees (the Nth, the 2Nth, ...,
//                counted across send() calls) is rejected (Delivery::kRejected) instead of
//                acknowledged; for testing attempt counting and dead-letter handling.
//   throw_every  N >= 1: every Nth send() call throws std::runtime_error instead, as a buggy
//                sink would; for testing that the relay survives it.
// Any other option is a ConfigError (the declaration below, as configure_sink checks it).
#pragma once

#include <cstddef>
#include <memory>

#include "sinks/sink.hpp"

namespace outbox::sinks {

extern const OptionSpec kNullOptions[];
extern const std::size_t kNullOptionCount;

std::unique_ptr<Sink> create_null_sink(const Options& options);

}  // namespace outbox::sinks
