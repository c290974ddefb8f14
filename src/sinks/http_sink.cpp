#include "sinks/http_sink.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <utility>

#include "sinks/cloudevents.hpp"
#include "sinks/option_rules.hpp"
#include "sinks/signals_blocked.hpp"
#include "sinks/webhook_signature.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;

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

std::string utc_text(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
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

struct HttpSink::Request {
  std::size_t index = 0;
  CURLM* multi = nullptr;  // set once the handle is added
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string url;
  std::string body;
  char error[CURL_ERROR_SIZE] = {0};

  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() {
    if (multi != nullptr) curl_multi_remove_handle(multi, easy);
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
  void add_header(const std::string& name, std::string_view value) {
    // "Name;" is curl's way to send a header with an empty value ("Name:" removes it).
    add_line(value.empty() ? name + ";" : name + ": " + std::string(value));
  }
  void add_line(const std::string& line) {
    curl_slist* more = curl_slist_append(headers, line.c_str());
    if (more == nullptr) throw std::bad_alloc();
    headers = more;
  }
};

HttpSink::HttpSink(const Options& options) : settings_(http_settings(options)) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    throw std::runtime_error("http sink: curl_global_init failed");
  }
  multi_ = curl_multi_init();
  if (multi_ == nullptr) {
    curl_global_cleanup();
    throw std::runtime_error("http sink: curl_multi_init failed");
  }
  curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, settings_.max_concurrency);
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, settings_.max_concurrency);
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, settings_.max_concurrency);
}

HttpSink::~HttpSink() {
  curl_multi_cleanup(multi_);
  curl_global_cleanup();
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

bool HttpSink::prepare(const Message& m, Request& r, std::string& error) const {
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

  r.easy = curl_easy_init();
  if (r.easy == nullptr) throw std::bad_alloc();
  CURL* e = r.easy;
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, m.payload.empty() ? "" : m.payload.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m.payload.size()));
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

Outcome HttpSink::outcome_of(Request& r, CURLcode code) {
  long status = 0;
  if (code == CURLE_OK) curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &status);
  const Delivery delivery = classify(code, status);
  if (delivery == Delivery::kAcked) return {delivery, {}};
  if (code != CURLE_OK) {
    const std::string what = r.error[0] != '\0' ? r.error : curl_easy_strerror(code);
    return {delivery, "http: " + what};
  }
  std::string error = "http: the receiver answered " + std::to_string(status);
  if (status == 429 || status == 503) {
    curl_off_t seconds = 0;
    if (curl_easy_getinfo(r.easy, CURLINFO_RETRY_AFTER, &seconds) == CURLE_OK && seconds > 0) {
      seconds = std::min<curl_off_t>(seconds, kMaxRetryAfterSeconds);
      wait_until_ = std::max(wait_until_, std::time(nullptr) + static_cast<std::time_t>(seconds));
      error += "; the receiver asked to wait until " + utc_text(wait_until_);
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
  return {delivery, error};
}

void HttpSink::send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                    std::chrono::milliseconds timeout) {
  const std::size_t n = messages.size();
  if (n == 0) return;
  if (std::time(nullptr) < wait_until_) {
    const std::string error =
        "http: the receiver asked to wait until " + utc_text(wait_until_) + " (Retry-After)";
    for (Outcome& outcome : outcomes) outcome = {Delivery::kUnavailable, error};
    return;
  }
  const Clock::time_point deadline = Clock::now() + timeout;

  // Each message's successor of the same key; the first message of each key is ready.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> next(n, kNone);
  std::deque<std::size_t> ready;
  {
    std::map<std::pair<std::string_view, std::string_view>, std::size_t> last;
    for (std::size_t i = 0; i < n; ++i) {
      auto [it, first] = last.try_emplace({messages[i].aggregatetype, messages[i].aggregateid}, i);
      if (first) {
        ready.push_back(i);
      } else {
        next[it->second] = i;
        it->second = i;
      }
    }
  }

  // Settles message i, and when it is not delivered defers the rest of its key.
  auto settle = [&](std::size_t i, Outcome outcome) {
    const bool failed = outcome.delivery != Delivery::kAcked;
    const std::string reason = outcome.error;
    outcomes[i] = std::move(outcome);
    if (!failed) {
      if (next[i] != kNone) ready.push_back(next[i]);
      return;
    }
    for (std::size_t j = next[i]; j != kNone; j = next[j]) {
      outcomes[j] = {Delivery::kDeferred,
                     "not sent: an earlier event of its key was not delivered (" + reason + ")"};
    }
  };

  std::map<CURL*, std::unique_ptr<Request>> active;
  std::string stop_reason;  // set once no new request may start
  std::string last_error;
  while (true) {
    while (stop_reason.empty() && !ready.empty() &&
           active.size() < static_cast<std::size_t>(settings_.max_concurrency)) {
      const std::size_t i = ready.front();
      ready.pop_front();
      auto request = std::make_unique<Request>();
      request->index = i;
      std::string error;
      if (!prepare(messages[i], *request, error)) {
        settle(i, {Delivery::kRejected, error});
        continue;
      }
      {
        SignalsBlocked blocked;
        if (curl_multi_add_handle(multi_, request->easy) != CURLM_OK) {
          throw std::runtime_error("http sink: curl_multi_add_handle failed");
        }
      }
      request->multi = multi_;
      CURL* easy = request->easy;
      active.emplace(easy, std::move(request));
    }
    if (!stop_reason.empty()) {
      while (!ready.empty()) {
        settle(ready.front(), {Delivery::kUnavailable, stop_reason});
        ready.pop_front();
      }
    }
    if (active.empty() && ready.empty()) break;

    int running = 0;
    CURLMcode rc;
    {
      SignalsBlocked blocked;
      rc = curl_multi_perform(multi_, &running);
    }
    if (rc != CURLM_OK) {
      throw std::runtime_error(std::string("http sink: ") + curl_multi_strerror(rc));
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      auto it = active.find(msg->easy_handle);
      if (it == active.end()) continue;
      const CURLcode code = msg->data.result;  // msg is invalid once the handle is removed
      Outcome outcome = outcome_of(*it->second, code);
      if (outcome.delivery == Delivery::kUnavailable) {
        last_error = outcome.error;
        if (stop_reason.empty()) stop_reason = outcome.error;
      }
      const std::size_t i = it->second->index;
      active.erase(it);
      settle(i, std::move(outcome));
    }
    if (active.empty() && ready.empty()) break;

    // Also when nothing is in flight: a key's chain of quick answers must not outlast the
    // deadline either.
    std::string stopped;
    if (!keep_waiting(last_error)) {
      stopped = "not acknowledged: the relay stopped waiting";
      if (!last_error.empty()) stopped += " (" + last_error + ")";
    } else if (Clock::now() >= deadline) {
      stopped = "not acknowledged within " + std::to_string(timeout.count()) + " ms";
    }
    if (!stopped.empty()) {
      while (!active.empty()) {
        const std::size_t i = active.begin()->second->index;
        active.erase(active.begin());
        settle(i, {Delivery::kUnavailable, stopped});
      }
      while (!ready.empty()) {
        settle(ready.front(), {Delivery::kUnavailable, stopped});
        ready.pop_front();
      }
      break;
    }
    if (active.empty()) continue;  // start the next ones at once
    const auto until_deadline =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int wait_ms = static_cast<int>(std::clamp<long long>(until_deadline, 1, 100));
    curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
  }
}

std::unique_ptr<Sink> create_http_sink(const Options& options) {
  return std::make_unique<HttpSink>(options);
}

}  // namespace outbox::sinks
