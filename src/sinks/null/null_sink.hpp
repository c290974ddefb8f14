// The null sink: acknowledges every message at once, sends nothing anywhere. For benchmarks
// (it measures the relay alone) and tests.
//
// Options:
//   fail_every          N >= 1: every Nth message this sink instance offers (the Nth, the
//                       2Nth, ..., counted across batches; deferred messages do not count) is
//                       rejected (Delivery::kRejected) instead of acknowledged; for testing
//                       attempt counting and dead-letter handling.
//   unavailable_every   N >= 1: every Nth message offered (counted as for fail_every, the
//                       same count) is Delivery::kUnavailable instead, a transient failure;
//                       for testing the relay's per-key holds without a network. When both
//                       hit the same message, fail_every's rejection wins.
//   throw_every         N >= 1: every Nth send() or start() throws std::runtime_error instead,
//                       as a buggy sink would; for testing that the relay survives it.
//   delay_ms            0 to 1000: each send() or start() takes this long.
//   reject_aggregateid  the first message seen with this aggregateid is remembered by its id,
//                       and rejected each time it is offered until it was rejected
//                       reject_times times (1 to 1000, default 1); then it is acknowledged.
//                       For testing per-key order around a failing event.
//   record_file         an existing file (absolute path) that gets one line per acknowledged
//                       message, "aggregatetype TAB aggregateid TAB id TAB type", in batch
//                       order, each batch's lines with one write(2) on a descriptor opened
//                       with O_APPEND: several relay workers may share the file, which tests
//                       read as the log of an independent consumer. Fields are written as
//                       they are. If that write fails or is short, the messages that were to
//                       be acknowledged are kUnavailable instead (a short write may leave
//                       their lines in the file: a consumer then sees them twice later, as
//                       after a lost acknowledgement). A regular file that gives other users
//                       no permission (mode & 007 == 0) is refused: secret files and private
//                       keys must be such files, and a role that may only call configure_sink
//                       must not be able to append to them.
// Any other option is a ConfigError (the declaration below, as configure_sink checks it).
//
// Per-key order (sink.hpp): once a message is rejected or unavailable, every later message
// of its key (aggregatetype, aggregateid) in the batch is kDeferred, and so is every message
// of that key in batches started while that batch is unfinished. start() decides a whole
// batch at once (finish() has nothing to wait for); send() decides its own batch only.
#pragma once

#include <cstddef>
#include <memory>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

extern const OptionSpec kNullOptions[];
extern const std::size_t kNullOptionCount;

std::unique_ptr<Sink> create_null_sink(const Options& options);

}  // namespace outbox::sinks
