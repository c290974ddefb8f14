#include "sinks/common/cloudevents.hpp"

#include <cstdio>
#include <ctime>

namespace outbox::sinks::cloudevents {

Settings take_settings(Options& options) {
  Settings settings;
  bool source_given = false;
  Options rest;
  rest.reserve(options.size());
  for (auto& option : options) {
    if (option.first == kEnabledOption.name) {
      settings.enabled = option.second == "true";
    } else if (option.first == kSourceOption.name) {
      settings.source = option.second;
      source_given = true;
    } else {
      rest.push_back(std::move(option));
    }
  }
  options = std::move(rest);
  if (source_given && settings.source.empty()) {
    throw ConfigError("cloudevents.source: must not be empty");
  }
  if (source_given && !settings.enabled) {
    throw ConfigError("cloudevents.source: set only with cloudevents = true");
  }
  return settings;
}

std::string rfc3339(std::int64_t unix_us) {
  std::int64_t seconds = unix_us / 1000000;
  std::int64_t micros = unix_us % 1000000;
  if (micros < 0) {
    micros += 1000000;
    seconds -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(micros));
  return buf;
}

std::vector<Attribute> attributes(const Message& message, std::string_view source) {
  return {
      {"specversion", "1.0"},
      {"id", std::string(message.id)},
      {"source", std::string(source)},
      {"type", std::string(message.type)},
      {"subject", std::string(message.aggregateid)},
      {"time", rfc3339(message.created_at_unix_us)},
      {"datacontenttype", std::string(kContentType)},
  };
}

}  // namespace outbox::sinks::cloudevents
