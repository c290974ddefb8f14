// The relay's side of the C sink interface (src/include/outbox_sink.h): checks a plugin's
// table and wraps its callbacks in the C++ Sink the relay uses. Plain C++, no PostgreSQL:
// unit-tested with plugins that break every rule (test/unit/plugin_host_test.cpp).
//
// What a sink does wrong becomes an error, not a crash: a malformed table is refused with the
// reason; an outcome left unset or with an unknown code counts as kUnavailable; a call to
// keep_waiting() from the wrong thread is refused; each such breach is reported once through
// take_log() as a warning that names the sink.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/common/option_rules.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class PluginHost {
 public:
  // Checks the table `init` returned for the library outbox_sink_<name>.so. Throws ConfigError
  // with the reason when it breaks a rule of outbox_sink.h. The table must outlive this object
  // (it is static in a library that stays loaded).
  PluginHost(const OutboxSinkCallbacks* table, std::string_view name);

  const std::string& name() const { return name_; }
  OptionTable options() const { return {specs_.data(), specs_.size()}; }

  // Creates a sink from resolved options. Throws ConfigError (OUTBOX_SINK_CONFIG_ERROR) or
  // std::runtime_error (any other failure), with the sink's message.
  std::unique_ptr<Sink> create(const Options& resolved) const;

 private:
  OutboxSinkCallbacks callbacks_{};  // the plugin's, fields beyond its size left NULL
  std::string name_;
  std::vector<OptionSpec> specs_;
};

}  // namespace outbox::sinks
