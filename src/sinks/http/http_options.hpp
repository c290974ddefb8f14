// The HTTP webhook sink's options (kHttpOptions; the reference is docs/sink-options.md) and
// its URL template.
//
// URL template: an http:// or https:// URL with placeholders ${aggregatetype}, ${type} and
// ${aggregateid} in its path or query, each value percent-encoded (every byte but
// A-Z a-z 0-9 - . _ ~). Placeholders are refused in the scheme and the authority, so the
// events' data can never choose the host an event goes to. Any other ${...}, an unterminated
// "${", another scheme, or a URL curl cannot parse is a ConfigError at create.
//
// Userinfo (https://user:password@host/, or user@host) is refused: the options are stored in
// clear, so a password there would be readable in outbox.sink_config and pg_dump. The query's
// values are redacted from the description, which monitoring roles read.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sinks/common/cloudevents.hpp"
#include "sinks/common/event_template.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

extern const OptionSpec kHttpOptions[];
extern const std::size_t kHttpOptionCount;

class UrlTemplate {
 public:
  // Throws ConfigError (message starts with "url: ").
  explicit UrlTemplate(const std::string& text);
  UrlTemplate() = default;

  std::string render(const Message& message) const { return template_.render(message); }
  // What describe() shows (outbox.status, outbox.cluster_status, which pg_monitor reads):
  // the template with its query's values and its fragment redacted (url_redacted()).
  const std::string& shown() const { return shown_; }

 private:
  EventTemplate template_;
  std::string shown_;
};

// `url` with each query value that is not only placeholders, a query part without a value,
// and the fragment replaced by "[redacted]": a receiver's token often rides in the query
// (?api_key=...). The scheme, host and path are shown; no credential belongs there (userinfo
// is refused).
std::string url_redacted(std::string_view url);

// Every byte but the unreserved ones (RFC 3986) as %XX.
std::string percent_encoded(std::string_view text);

struct HttpSettings {
  UrlTemplate url;
  std::vector<std::string> keys;  // HMAC keys, decoded from the whsec_ secrets; empty: unsigned
  long timeout_ms = 10000;
  long max_concurrency = 8;
  long straggler_ms = 200;  // 0: a batch waits for each request up to timeout_ms
  bool tls_verify = true;
  std::string ca_file;  // empty: the system's CAs
  bool follow_redirects = false;
  cloudevents::Settings cloudevents;
  std::string description;  // describe(): no secret
};

inline constexpr long kMaxConcurrency = 256;
inline constexpr long kMaxTimeoutMs = 10 * 60 * 1000;

// From the options create() receives (resolved). Throws ConfigError; an undeclared option is
// an OptionError. No message contains a secret.
HttpSettings http_settings(const Options& options);

}  // namespace outbox::sinks
