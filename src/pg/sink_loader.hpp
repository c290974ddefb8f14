// Finds a sink by name in $libdir (outbox_sink_<name>.so), applies the option rules
// (src/sinks/common/option_rules.hpp) with outbox.sink_files_directory, creates the sink with
// signals blocked, and converts options from jsonb. With outbox.sink_isolation = process the sink
// is created in a child process (sinks/host/process_sink.hpp); the library is still loaded here,
// for its declared options.
#pragma once

#include <memory>
#include <string>

#include "pg/postgres.hpp"
#include "sinks/common/sink.hpp"
#include "sinks/host/plugin_host.hpp"

namespace outbox::pg {

// A flat JSON object -> options; values that are numbers or booleans become their text.
// Throws outbox::Error 22023 for anything else. `function` prefixes error messages.
sinks::Options sink_options_from_jsonb(const char* function, Jsonb* options);

// Loads the sink library outbox_sink_<name>.so and checks its table. Throws outbox::Error
// 22023 for an invalid or unknown name, or a library that is no sink.
sinks::PluginHost load_sink(const char* function, const std::string& name);

// Loads the sink library, resolves the options (files, secrets) and creates the sink. Throws
// outbox::Error 22023 for an unknown sink name, an option the rules refuse, or options the sink
// refuses. No message holds a secret.
std::unique_ptr<sinks::Sink> create_sink(const char* function, const std::string& name,
                                         const sinks::Options& options);

}  // namespace outbox::pg
