#include "sinks/nats/nats_options.hpp"

#include <iterator>
#include <string_view>
#include <utility>

#include "sinks/common/option_rules.hpp"

namespace outbox::sinks {

// Keep docs/sink-options.md in step: a unit test fails when an option is missing there.
const OptionSpec kNatsOptions[] = {
    {"servers", OptionKind::kText,
     "NATS servers, comma-separated nats:// or tls:// URLs (required)"},
    {"subject.template", OptionKind::kText,
     "subject per event: ${aggregatetype}, ${aggregateid}, ${type}"},
    {"user", OptionKind::kText, "user name (with password)"},
    {"password", OptionKind::kSecret, "password of user"},
    {"token", OptionKind::kSecret, "authentication token"},
    {"creds", OptionKind::kPrivateFile, "NATS credentials file (user JWT and NKey seed)"},
    {"tls.ca_file", OptionKind::kFile,
     "CA certificates (PEM) that verify the servers; implies TLS"},
    {"stream", OptionKind::kText,
     "the stream expected to store every event (Nats-Expected-Stream)"},
    {"max_pending", OptionKind::kInteger,
     "most messages published and not yet acknowledged (1 to 1000000, default 4096)"},
    cloudevents::kEnabledOption,
    cloudevents::kSourceOption,
};
const std::size_t kNatsOptionCount = std::size(kNatsOptions);

namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::vector<std::string> parse_servers(const std::string& value) {
  std::vector<std::string> servers;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    const std::string url = trimmed(std::string_view(value).substr(start, comma - start));
    start = comma + 1;
    if (url.empty()) throw ConfigError("nats sink: servers: an empty URL in the list");
    if (!starts_with(url, "nats://") && !starts_with(url, "tls://")) {
      throw ConfigError("nats sink: servers: \"" + url +
                        "\" is not a nats:// or tls:// URL (host:port after the scheme)");
    }
    // A URL's user information would be a credential in plain text: not shown, not taken.
    if (url.find('@') != std::string::npos) {
      throw ConfigError(
          "nats sink: servers: a URL holds user information (\"...@\"); give user with "
          "password_file, or token_file, or creds instead");
    }
    if (url.find_first_of(" \t\r\n") != std::string::npos) {
      throw ConfigError("nats sink: servers: \"" + url + "\" holds whitespace");
    }
    servers.push_back(url);
  }
  return servers;
}

}  // namespace

NatsSettings nats_settings(Options options) {
  check_declared("nats", OptionTable{kNatsOptions, kNatsOptionCount}, options);
  NatsSettings out;
  out.cloudevents = cloudevents::take_settings(options);
  std::string servers;
  std::string subject_template(nats::kDefaultSubjectTemplate);
  for (const auto& [name, value] : options) {
    if (name == "servers") {
      servers = value;
    } else if (name == "subject.template") {
      subject_template = value;
    } else if (name == "user") {
      out.user = value;
    } else if (name == "password") {
      out.password = value;
    } else if (name == "token") {
      out.token = value;
    } else if (name == "creds") {
      out.creds = value;
    } else if (name == "tls.ca_file") {
      out.ca_file = value;
    } else if (name == "stream") {
      if (value.empty() || value.find_first_of(" \t\r\n.*>") != std::string::npos) {
        throw ConfigError("nats sink: stream: \"" + value +
                          "\" is not a stream name (no whitespace, '.', '*' or '>')");
      }
      out.stream = value;
    } else if (name == "max_pending") {
      const long long n = std::stoll(value);  // well-formed: check_declared
      if (n < 1 || n > 1000000) {
        throw ConfigError("nats sink: max_pending must be 1 to 1000000, not " + value);
      }
      out.max_pending = n;
    }
  }
  if (servers.empty()) throw ConfigError("nats sink: servers is required (nats://host:4222,...)");
  out.servers = parse_servers(servers);
  out.subject_template = nats::SubjectTemplate(subject_template);
  const int methods = !out.user.empty() + !out.token.empty() + !out.creds.empty();
  if (methods > 1) {
    throw ConfigError("nats sink: give one way to authenticate: user, token or creds");
  }
  if (!out.user.empty() && out.password.empty()) {
    throw ConfigError("nats sink: user needs password (password_file)");
  }
  if (out.user.empty() && !out.password.empty()) {
    throw ConfigError("nats sink: password needs user");
  }

  out.description = "nats servers=" + servers + " subject.template=" + out.subject_template.text();
  if (!out.stream.empty()) out.description += " stream=" + out.stream;
  if (out.cloudevents.enabled) out.description += " cloudevents=true";
  return out;
}

}  // namespace outbox::sinks
