// The NATS sink's options: its declaration (kNatsOptions, the reference is
// docs/sink-options.md) and what create() makes of the resolved options. Plain C++, no cnats
// header. No option runs code or names a file outside outbox.sink_files_directory: the only
// files read are the kFile options (creds, tls.ca_file) and the kSecret ones, resolved by
// the option rules (option_rules.hpp) before create() sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sinks/common/cloudevents.hpp"
#include "sinks/nats/nats_subject.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

extern const OptionSpec kNatsOptions[];
extern const std::size_t kNatsOptionCount;

inline constexpr std::int64_t kDefaultMaxPending = 4096;

struct NatsSettings {
  std::vector<std::string> servers;  // nats:// or tls:// URLs, without user information
  nats::SubjectTemplate subject_template;
  std::string user;
  std::string password;  // secret
  std::string token;     // secret
  std::string creds;     // absolute path of a credentials file (kFile), or empty
  std::string ca_file;   // absolute path (kFile), or empty
  std::string stream;    // expected stream (Nats-Expected-Stream), or empty
  std::int64_t max_pending = kDefaultMaxPending;
  cloudevents::Settings cloudevents;
  std::string description;  // describe(): servers and subject template, never a secret
};

// From the options create() receives (resolved). Throws ConfigError (an OptionError for an
// undeclared option); no message contains a secret.
NatsSettings nats_settings(Options options);

}  // namespace outbox::sinks
