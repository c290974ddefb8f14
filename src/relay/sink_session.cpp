// The relay's sink: created from outbox.sink_config, created again when configure_sink or
// unconfigure_sink commits (they move the configuration generation) or when it became
// unusable, and observed while it waits for acknowledgements.
#include "relay/session.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/settings.hpp"
#include "pg/sink_loader.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "postmaster/interrupt.h"
#include "commands/extension.h"
}

namespace outbox::pg::relay {

SinkSession::SinkSession(Report& report) : report_(report) {}

//  - What the client library reports (brokers down, say) shows in outbox.status at once,
//    not only when outbox.send_timeout has run out.
//  - A shutdown or a new sink configuration does not wait for send_timeout: the batch is
//    given up, and its events are sent again.
bool SinkSession::WaitObserver::keep_waiting(std::string_view client_error) noexcept {
  report_.client_error(client_error);
  return !ShutdownRequestPending && relay_database_generation(MyDatabaseId) == generation_;
}

bool SinkSession::changed() const { return relay_database_generation(MyDatabaseId) != generation_; }

struct SinkSession::Config {
  Oid extension;
  bool has_extension;
  bool needs_update;
  bool configured;
  char* name;
  Jsonb* options;
  TimestampTz updated_at;
};

// In a transaction of its own; the name and options are copied into `iteration`.
SinkSession::Config SinkSession::read_config(MemoryContext iteration) {
  begin_worker_transaction("outbox relay: reading the sink configuration");
  Config config = guard([&]() -> Config {
    Config c{};
    Oid nsp = get_namespace_oid("outbox", true);
    c.extension = get_extension_oid("outbox", true);
    c.has_extension = OidIsValid(nsp) && OidIsValid(get_relname_relid("sink_config", nsp));
    // The delivery log appeared in 0.6.0: until ALTER EXTENSION outbox UPDATE, wait.
    c.needs_update = c.has_extension && !OidIsValid(get_relname_relid("deliveries", nsp));
    if (!c.has_extension || c.needs_update) return c;
    int rc = SPI_execute("SELECT sink, options, updated_at FROM outbox.sink_config", true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "outbox relay: reading outbox.sink_config failed");
    if (SPI_processed == 0) return c;
    c.configured = true;
    bool isnull;
    HeapTuple tuple = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    MemoryContext old = MemoryContextSwitchTo(iteration);
    c.name = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
    c.options = DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 2, &isnull));
    MemoryContextSwitchTo(old);
    c.updated_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
    return c;
  });
  commit_worker_transaction(iteration);
  return config;
}

bool SinkSession::ensure(MemoryContext iteration) {
  const uint32 generation = relay_database_generation(MyDatabaseId);
  // Before the look: a CREATE EXTENSION that commits after it moves this on.
  const uint32 requests = relay_database_requests(MyDatabaseId);
  if (keeps_current(generation)) return true;
  const Config config = read_config(iteration);
  generation_ = generation;
  if (!has_sink_to_create(config, requests)) return false;
  if (sink_ && name_ == config.name && config_updated_at_ == config.updated_at) return true;
  create(config);
  return true;
}

bool SinkSession::keeps_current(uint32 generation) {
  // A reload that changed outbox.sink_isolation creates the sink again, where it now belongs.
  if (sink_ && isolation_ != settings.sink_isolation) sink_.reset();
  if (sink_ && generation == generation_ && sink_->usable()) return true;
  if (sink_ && !sink_->usable()) {
    report_.record_error("sink " + name_ + " is unusable; creating it again");
    sink_.reset();
  }
  return false;
}

// False when there is nothing to send with: no extension (the relay exits), one that waits
// for ALTER EXTENSION UPDATE, or no sink configured.
bool SinkSession::has_sink_to_create(const Config& config, uint32 requests) {
  if (!config.has_extension || config.needs_update || config.extension != extension_) {
    // A re-created extension has a new sequence: read the mark again when it is back. Its
    // sink is configured anew: the old one is forgotten below.
    new_extension_ = true;
    sink_.reset();
    extension_ = config.extension;
  }
  if (config.has_extension && !config.needs_update && config.configured) return true;
  sink_.reset();
  name_.clear();
  report_.counters().sink[0] = '\0';
  if (!config.has_extension) {
    // Nothing to wait for here: the launcher starts relays again at CREATE EXTENSION.
    relay_database_absent(MyDatabaseId, requests);
    absent_ = true;
    return false;
  }
  report_.publish(config.needs_update ? WorkerState::kWaitingForUpdate
                                      : WorkerState::kUnconfigured);
  return false;
}

// The relay backs off and says so (outbox.status, outbox_relay_config_error): an option
// that configure_sink accepted may fail later, a file gone or a broker's name unknown.
void SinkSession::create(const Config& config) {
  sink_.reset();
  try {
    sinks::Options options = sink_options_from_jsonb("outbox relay", config.options);
    sink_ = create_sink("outbox relay", config.name, options);
  } catch (const std::exception& e) {
    throw sinks::ConfigError(std::string("sink configuration error: ") + e.what());
  }
  isolation_ = settings.sink_isolation;
  sink_->observe_waits(&wait_observer_);
  name_ = config.name;
  config_updated_at_ = config.updated_at;
  const std::string description = sink_->describe();
  WorkerCounters& counters = report_.counters();
  snprintf(counters.sink, sizeof(counters.sink), "%s", description.c_str());
  guard([&] {
    ereport(LOG,
            (errmsg("outbox relay %d: sending with %s", report_.number(), description.c_str())));
  });
}

bool SinkSession::take_new_extension() {
  const bool taken = new_extension_;
  new_extension_ = false;
  return taken;
}

// The sink's client-library log lines (librdkafka's), into the server log: after every
// pass, so at most outbox.poll_interval (or a back-off) after they were written.
void SinkSession::write_log() {
  if (!sink_) return;
  std::vector<sinks::LogLine> lines;
  try {
    lines = sink_->take_log();
  } catch (const std::exception&) {
    return;  // out of memory: the lines are lost, the relay goes on
  }
  for (const sinks::LogLine& line : lines) {
    const int level = line.level <= 4 ? WARNING : line.level <= 6 ? LOG : DEBUG1;
    const char* text = line.text.c_str();
    guard([&] { ereport(level, (errmsg("outbox relay %d: %s", report_.number(), text))); });
  }
}

}  // namespace outbox::pg::relay
