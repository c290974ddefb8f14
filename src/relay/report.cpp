// What outbox.status shows of a relay: its state, its sink, its counters and its last
// error, copied to the relay's slot in shared memory (pg/relay_slots.hpp) at each change.
#include "relay/session.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_stats.hpp"

extern "C" {
#include "miscadmin.h"
}

namespace outbox::pg::relay {

void Report::publish(WorkerState state) {
  counters_.state = state;
  publish();
}

void Report::publish() { relay_worker_publish(slot_, counters_); }

void Report::record_error(const std::string& error) {
  snprintf(counters_.last_error, sizeof(counters_.last_error), "%s", error.c_str());
  counters_.last_error_at = guard([] { return GetCurrentTimestamp(); });
}

void Report::client_error(std::string_view error) noexcept {
  if (error.empty()) return;
  char line[sizeof(counters_.last_error)];
  snprintf(line, sizeof(line), "sink: %.*s", static_cast<int>(error.size()), error.data());
  if (strcmp(line, counters_.last_error) != 0) {
    memcpy(counters_.last_error, line, sizeof(line));
    counters_.last_error_at = GetCurrentTimestamp();
    publish();
  }
}

void Report::resume() {
  counters_ = relay_slot_read(slot_).counters;
  counters_.pid = MyProcPid;
}

void Report::count(const BatchResult& result, const std::string& sink) {
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  RelayStatsDelta stats = result.stats;
  stats.events_sent = result.acked;
  stats.events_failed = result.transient;
  stats.events_rejected = result.rejected;
  stats.events_dead = result.dead;
  stats.batches = result.batches;
  relay_stats_add(MyDatabaseId, sink.c_str(), stats);
  counters_.batches += result.batches;
  counters_.events_sent += result.acked;
  counters_.events_failed += result.rejected + result.transient;
  counters_.events_dead += result.dead;
  if (result.acked > 0) counters_.last_success_at = now;
  if (result.rejected > 0) {
    record_error(result.first_rejection);
    guard([&] {
      ereport(LOG, (errmsg("outbox relay %d: the sink rejected %d of %d events (%d now "
                           "dead-lettered): %s",
                           number(), result.rejected, result.fetched, result.dead,
                           result.first_rejection.c_str())));
    });
  }
  if (result.transient > 0) {
    record_error(result.first_transient);
    // A flaky destination fails some events in many passes: the first such pass is logged,
    // then at doubling intervals of them, until a pass has none.
    ++transient_passes_;
    if ((transient_passes_ & (transient_passes_ - 1)) == 0) {
      guard([&] {
        ereport(LOG, (errmsg("outbox relay %d: %d of %d events were unavailable while others "
                             "were delivered; their keys wait for a retry (pass %d in a "
                             "row): %s",
                             number(), result.transient, result.fetched, transient_passes_,
                             result.first_transient.c_str())));
      });
    }
  } else {
    transient_passes_ = 0;
  }
  publish();
}

}  // namespace outbox::pg::relay
