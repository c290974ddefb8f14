// The HTTP sink's requests: building one POST per event (headers, signature, curl options)
// and what its answer means. See http_sink.hpp.
#include "sinks/http/http_request.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "sinks/common/cloudevents.hpp"
#include "sinks/http/http_sink.hpp"
#include "sinks/http/webhook_signature.hpp"

namespace outbox::sinks {

namespace {

// An HTTP token (RFC 9110 tchar): what a header name may be.
bool is_token(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    const bool ok = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// A header value may hold tabs and bytes from 0x20, but no other control character.
bool is_header_value(std::string_view value) {
  return std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

std::size_t collect_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  const std::size_t n = size * count;
  if (body->size() < HttpSink::kMaxBodyBytes) {
    body->append(data, std::min(n, HttpSink::kMaxBodyBytes - body->size()));
  }
  return n;  // the rest is read and dropped, not an error
}

}  // namespace

std::string http_utc_text(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string HttpSink::excerpt(const std::string& body) {
  std::string out;
  for (char c : body) {
    if (out.size() == kMaxExcerptBytes) break;
    const auto u = static_cast<unsigned char>(c);
    // ASCII only: a cut could otherwise leave half a UTF-8 character in the error.
    out += (u < 0x20 || u >= 0x7f) ? ' ' : c;
  }
  return out;
}

bool HttpSink::endpoint_failed(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
      return true;
    default:
      return false;
  }
}

Delivery HttpSink::classify(CURLcode code, long status) {
  if (code != CURLE_OK) {
    // A URL curl refuses fails the same way every time: the message is at fault.
    return code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL ||
                   code == CURLE_TOO_MANY_REDIRECTS
               ? Delivery::kRejected
               : Delivery::kUnavailable;
  }
  if (status >= 200 && status < 300) return Delivery::kAcked;
  if (status == 408 || status == 429 || status >= 500) return Delivery::kUnavailable;
  return Delivery::kRejected;
}

bool HttpSink::prepare(const Message& m, HttpRequest& r, std::string& error) const {
  for (auto [what, value] : {std::pair<const char*, std::string_view>{"type", m.type},
                             {"aggregatetype", m.aggregatetype},
                             {"aggregateid", m.aggregateid}}) {
    if (!is_header_value(value)) {
      error = std::string("http: the event's ") + what +
              " holds a control character, which no HTTP header can carry";
      return false;
    }
  }
  r.url = settings_.url.render(m);
  r.id = m.id;
  r.key = {std::string(m.aggregatetype), std::string(m.aggregateid)};
  r.payload = m.payload;
  const std::string timestamp = std::to_string(std::time(nullptr));

  if (settings_.cloudevents.enabled) {
    for (const auto& [name, value] : cloudevents::attributes(m, settings_.cloudevents.source)) {
      r.add_header(name == "datacontenttype" ? "Content-Type" : "ce-" + name, value);
    }
  } else {
    r.add_header("Content-Type", cloudevents::kContentType);
  }
  r.add_line("Expect:");  // removes curl's 100-continue round trip for large bodies
  r.add_header("webhook-id", m.id);
  r.add_header("webhook-timestamp", timestamp);
  if (!settings_.keys.empty()) {
    r.add_header("webhook-signature",
                 webhook::signature_header(settings_.keys, m.id, timestamp, m.payload));
  }
  r.add_header("outbox-type", m.type);
  r.add_header("outbox-aggregatetype", m.aggregatetype);
  r.add_header("outbox-aggregateid", m.aggregateid);
  for (const auto& [name, value] : m.headers) {
    // Skipped rather than mangled: see docs/sink-options.md.
    if (is_token(name) && is_header_value(value)) {
      r.add_header("outbox-header-" + std::string(name), value);
    }
  }

  CURL* e = r.easy;  // fresh, or reset by recycle()
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.payload.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.payload.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r.headers);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "outbox-relay");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, settings_.follow_redirects ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(e, CURLOPT_POSTREDIR, static_cast<long>(CURL_REDIR_POST_ALL));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, settings_.timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, settings_.timeout_ms);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  // "" disables proxies, also those the server's environment (http_proxy, ...) would name.
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, settings_.tls_verify ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, settings_.tls_verify ? 2L : 0L);
  if (!settings_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, settings_.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &collect_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.error);
  curl_easy_setopt(e, CURLOPT_PRIVATE, &r);
  curl_easy_setopt(e, CURLOPT_VERBOSE, 0L);
  return true;
}

HttpAnswer HttpSink::answer_of(HttpRequest& r, CURLcode code) const {
  HttpAnswer answer;
  long status = 0;
  if (code == CURLE_OK) curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &status);
  const Delivery delivery = classify(code, status);
  if (delivery == Delivery::kAcked) {
    answer.outcome = {delivery, {}};
    return answer;
  }
  if (code != CURLE_OK) {
    const std::string what = r.error[0] != '\0' ? r.error : curl_easy_strerror(code);
    answer.outcome = {delivery, "http: " + what};
    // A timeout before any byte of the request went out (no connection came up): every
    // other request would fail the same way. A timeout waiting for the answer is this
    // request's own trouble.
    long sent = 0;
    const bool never_sent = code == CURLE_OPERATION_TIMEDOUT &&
                            curl_easy_getinfo(r.easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK &&
                            sent == 0;
    if (endpoint_failed(code) || never_sent) {
      answer.stop = "not sent: the receiver could not be reached (" + answer.outcome.error + ")";
    }
    return answer;
  }
  std::string error = "http: the receiver answered " + std::to_string(status);
  curl_header* retry_after = nullptr;
  if ((status == 429 || status == 503) &&
      curl_easy_header(r.easy, "Retry-After", 0, CURLH_HEADER, -1, &retry_after) == CURLHE_OK) {
    // The receiver speaks for the whole endpoint: nothing more is sent until then.
    curl_off_t seconds = 0;
    curl_easy_getinfo(r.easy, CURLINFO_RETRY_AFTER, &seconds);
    seconds = std::clamp<curl_off_t>(seconds, 0, kMaxRetryAfterSeconds);
    answer.stop = "not sent: the receiver asked to retry after " + std::to_string(seconds) + " s";
    if (seconds > 0) {
      answer.wait_until = std::time(nullptr) + static_cast<std::time_t>(seconds);
      error += "; the receiver asked to wait until " + http_utc_text(answer.wait_until);
    }
  } else if (status >= 300 && status < 400) {
    char* location = nullptr;
    curl_easy_getinfo(r.easy, CURLINFO_REDIRECT_URL, &location);
    error += ", a redirect to " +
             (location != nullptr ? excerpt(location) : std::string("(no Location)")) +
             (settings_.follow_redirects ? ", not followed"
                                         : ", not followed (follow_redirects is false)");
  }
  // The receiver's own words, for 4xx and 5xx alike (not for a redirect: its body is noise).
  if (!r.body.empty() && (status < 300 || status >= 400)) error += ": " + excerpt(r.body);
  answer.outcome = {delivery, error};
  return answer;
}

}  // namespace outbox::sinks
