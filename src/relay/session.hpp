// What a relay reports (outbox.status) and the sink it sends with (relay.hpp lists the
// relay's parts).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "pg/postgres.hpp"
#include "pg/relay_slots.hpp"
#include "relay/batch.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::pg::relay {

// report.cpp: what outbox.status shows of this relay, in its shared-memory slot.
class Report {
 public:
  // `slot`: its shared-memory slot; `worker`: its number in its database, from 0.
  Report(int slot, int worker) : slot_(slot), worker_(worker) {}

  // The relay's number in the server log ("outbox relay 1"), 1-based.
  int number() const { return worker_ + 1; }
  WorkerCounters& counters() { return counters_; }
  // Copies the counters to shared memory, with `state`, or the current one.
  void publish(WorkerState state);
  void publish();
  void record_error(const std::string& error);
  // What the sink's client library reports while a batch waits; on the sink's wait, so it
  // neither throws nor raises an ERROR.
  void client_error(std::string_view error) noexcept;
  // A transaction that fetched events, once committed: its batches, and its rejections (also
  // logged); the statistics of `sink` (relay_stats.hpp).
  void count(const BatchResult& result, const std::string& sink);
  // Takes the counters of the slot's last relay (a restart goes on counting).
  void resume();

 private:
  const int slot_;
  const int worker_;
  WorkerCounters counters_{};
  int transient_passes_ = 0;  // passes in a row with transient failures
};

// sink_session.cpp: the configured sink, read from outbox.sink_config whenever the
// configuration generation moves (configure_sink and unconfigure_sink bump it at commit).
class SinkSession {
 public:
  explicit SinkSession(Report& report);

  // Makes sure the configured sink exists; false when there is nothing to send with. A
  // transaction of its own when the configuration has to be read; `iteration` is the memory
  // context it leaves current.
  bool ensure(MemoryContext iteration);
  // True once after ensure() found the extension missing, not updated or created again
  // (also when it then failed): a new extension has a new sequence, so the low-water mark
  // must be read again.
  bool take_new_extension();
  // The configuration changed since ensure() read it.
  bool changed() const;
  // ensure() found no extension in this database, and told the launcher: the relay exits.
  bool absent() const { return absent_; }
  sinks::Sink& sink() { return *sink_; }
  const std::string& name() const { return name_; }
  // Destroys the sink (and with it, its client library's threads and buffers).
  void drop() { sink_.reset(); }
  // The client library's log lines, into the server log.
  void write_log();

 private:
  // Watches the sink's waits for acknowledgements, on the relay's thread.
  class WaitObserver final : public sinks::WaitObserver {
   public:
    WaitObserver(Report& report, const uint32& generation)
        : report_(report), generation_(generation) {}
    bool keep_waiting(std::string_view client_error) noexcept override;

   private:
    Report& report_;
    const uint32& generation_;
  };
  // What outbox.sink_config and the catalogs say (sink_session.cpp).
  struct Config;

  // The steps of ensure(): whether the sink there is still the one to use; the
  // configuration, read; the extension's state and whether it configures a sink; a new sink
  // from the configuration.
  bool keeps_current(uint32 generation);
  static Config read_config(MemoryContext iteration);
  bool has_sink_to_create(const Config& config, uint32 requests);
  void create(const Config& config);

  Report& report_;
  uint32 generation_ = 0;
  WaitObserver wait_observer_{report_, generation_};  // destroyed after sink_
  std::unique_ptr<sinks::Sink> sink_;
  std::string name_;
  // The installation of the extension the relay works for (pg_extension's oid).
  Oid extension_ = InvalidOid;
  bool new_extension_ = false;
  bool absent_ = false;
  TimestampTz config_updated_at_ = 0;
  int isolation_ = -1;  // the outbox.sink_isolation sink_ was created with
};

}  // namespace outbox::pg::relay
