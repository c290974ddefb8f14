#include "sinks/http/http_options.hpp"

#include <curl/curl.h>

#include <iterator>
#include <memory>
#include <string_view>
#include <utility>

#include "sinks/common/option_rules.hpp"
#include "sinks/http/webhook_signature.hpp"

namespace outbox::sinks {

// Keep docs/sink-options.md in step: a unit test fails when an option is missing there.
const OptionSpec kHttpOptions[] = {
    {"url", OptionKind::kText,
     "http(s) URL; ${aggregatetype}, ${type}, ${aggregateid} in its path or query (required)"},
    {"secret", OptionKind::kSecret,
     "whsec_<base64> signing secrets, whitespace-separated (all sign during a rotation)"},
    {"timeout.ms", OptionKind::kInteger, "time limit of one request (ms). Default 10000."},
    {"max_concurrency", OptionKind::kInteger, "requests in flight at once. Default 8."},
    {"straggler.timeout.ms", OptionKind::kInteger,
     "once nothing else of a batch is waiting, stop waiting for a request after this long "
     "(ms; 0: wait timeout.ms); it goes on, its key waits. Default 200."},
    {"tls.verify", OptionKind::kBoolean,
     "verify the receiver's certificate and host name. Default true."},
    {"tls.ca_file", OptionKind::kFile, "CA certificates (PEM) that verify the receiver"},
    {"follow_redirects", OptionKind::kBoolean,
     "follow 3xx redirects to http(s) URLs (at most 5). Default false: 3xx is a rejection."},
    cloudevents::kEnabledOption,
    cloudevents::kSourceOption,
};
const std::size_t kHttpOptionCount = std::size(kHttpOptions);

namespace {

constexpr const char* kUserinfoError =
    "url: must not contain a user name or password (user:password@host): the sink's options "
    "are stored in clear in outbox.sink_config and in pg_dump. The http sink sends no "
    "credentials; let the receiver authenticate the events by their signature: put the "
    "signing secret (whsec_...) in a file inside outbox.sink_files_directory and name it with "
    "the secret_file option";

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

long integer(const std::string& name, const std::string& value, long min, long max) {
  const long long n = std::stoll(value);  // well-formed: check_declared saw it
  if (n < min || n > max) {
    throw ConfigError("http sink: " + name + " must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + ", not " + value);
  }
  return static_cast<long>(n);
}

struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

// Each value percent-encoded: an event's data can add no '/', '?' or '#' to the URL.
const EventTemplate::Rules kUrlRules{
    "url", EventTemplate::kAggregateType | EventTemplate::kAggregateId | EventTemplate::kType,
    nullptr, &percent_encoded};

}  // namespace

std::string percent_encoded(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

namespace {

// Whether `text` is one placeholder or more, back to back, and nothing else.
bool only_placeholders(std::string_view text) {
  if (text.empty()) return false;
  while (!text.empty()) {
    if (text.substr(0, 2) != "${") return false;
    const std::size_t end = text.find('}');
    if (end == std::string_view::npos) return false;
    text.remove_prefix(end + 1);
  }
  return true;
}

}  // namespace

std::string url_redacted(std::string_view url) {
  static constexpr std::string_view kRedacted = "[redacted]";
  const std::size_t hash = url.find('#');
  const std::string_view fragment = hash == std::string_view::npos ? "" : url.substr(hash + 1);
  url = url.substr(0, hash);
  const std::size_t question = url.find('?');
  std::string out(url.substr(0, question));
  if (question != std::string_view::npos) {
    out += '?';
    std::string_view query = url.substr(question + 1);
    while (true) {
      const std::size_t amp = query.find('&');
      const std::string_view part = query.substr(0, amp);
      const std::size_t eq = part.find('=');
      const std::string_view value = eq == std::string_view::npos ? part : part.substr(eq + 1);
      if (eq != std::string_view::npos) out.append(part.substr(0, eq + 1));
      out.append(value.empty() || only_placeholders(value) ? value : kRedacted);
      if (amp == std::string_view::npos) break;
      out += '&';
      query.remove_prefix(amp + 1);
    }
  }
  if (!fragment.empty()) {
    out += '#';
    out.append(kRedacted);
  }
  return out;
}

UrlTemplate::UrlTemplate(const std::string& text) {
  const bool https = starts_with_nocase(text, "https://");
  if (!https && !starts_with_nocase(text, "http://")) {
    throw ConfigError("url: must start with http:// or https://");
  }
  const std::size_t authority = https ? 8 : 7;
  std::size_t path = text.find_first_of("/?#", authority);
  if (path == std::string::npos) path = text.size();
  if (text.find("${") < path) {
    throw ConfigError("url: placeholders are allowed in the path and query only, not the host");
  }
  // The options are stored in clear (outbox.sink_config, pg_dump): no credential in them. The
  // userinfo is not repeated.
  if (text.find('@', authority) < path) throw ConfigError(kUserinfoError);
  // curl reads "http:///x" as host "x": refuse an empty authority here.
  if (path == authority) throw ConfigError("url: has no host");
  template_ = EventTemplate(text, kUrlRules);
  shown_ = url_redacted(text);

  // What curl will parse: with sample values, so the fixed parts are checked now.
  Message sample;
  sample.aggregatetype = "a";
  sample.aggregateid = "1";
  sample.type = "t";
  std::unique_ptr<CURLU, UrlDeleter> url(curl_url());
  if (!url) throw std::bad_alloc();
  const CURLUcode rc = curl_url_set(url.get(), CURLUPART_URL, render(sample).c_str(), 0);
  if (rc != CURLUE_OK) {
    throw ConfigError(std::string("url: not a valid URL (") + curl_url_strerror(rc) + ")");
  }
  char* host = nullptr;
  if (curl_url_get(url.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK || host == nullptr ||
      *host == '\0') {
    curl_free(host);
    throw ConfigError("url: has no host");
  }
  curl_free(host);
  // Whatever curl would take for a user, password or login options (none after the check
  // above; this holds if curl's reading ever differs from it).
  for (const CURLUPart part : {CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS}) {
    char* value = nullptr;
    const CURLUcode got = curl_url_get(url.get(), part, &value, 0);
    curl_free(value);
    if (got == CURLUE_OK) throw ConfigError(kUserinfoError);
  }
}

HttpSettings http_settings(const Options& given) {
  const OptionTable table{kHttpOptions, kHttpOptionCount};
  check_declared("http", table, given);
  Options options = given;
  HttpSettings out;
  out.cloudevents = cloudevents::take_settings(options);

  bool have_url = false;
  for (const auto& [name, value] : options) {
    if (name == "url") {
      out.url = UrlTemplate(value);
      have_url = true;
    } else if (name == "secret") {
      out.keys = webhook::parse_secrets(value);
    } else if (name == "timeout.ms") {
      out.timeout_ms = integer(name, value, 1, kMaxTimeoutMs);
    } else if (name == "max_concurrency") {
      out.max_concurrency = integer(name, value, 1, kMaxConcurrency);
    } else if (name == "straggler.timeout.ms") {
      out.straggler_ms = integer(name, value, 0, kMaxTimeoutMs);
    } else if (name == "tls.verify") {
      out.tls_verify = value == "true";
    } else if (name == "tls.ca_file") {
      out.ca_file = value;
    } else if (name == "follow_redirects") {
      out.follow_redirects = value == "true";
    }
  }
  if (!have_url) throw ConfigError("http sink: url is required");

  out.description = "http url=" + out.url.shown();
  out.description += " timeout.ms=" + std::to_string(out.timeout_ms);
  out.description += " max_concurrency=" + std::to_string(out.max_concurrency);
  out.description += " straggler.timeout.ms=" + std::to_string(out.straggler_ms);
  if (!out.tls_verify) out.description += " tls.verify=false";
  if (!out.ca_file.empty()) out.description += " tls.ca_file=" + out.ca_file;
  if (out.follow_redirects) out.description += " follow_redirects=true";
  out.description += out.keys.empty() ? " unsigned"
                                      : " signed (" + std::to_string(out.keys.size()) + " secret" +
                                            (out.keys.size() == 1 ? ")" : "s)");
  if (out.cloudevents.enabled) out.description += " cloudevents source=" + out.cloudevents.source;
  return out;
}

}  // namespace outbox::sinks
