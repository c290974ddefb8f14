#include "sinks/nats/nats_lookup.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace outbox::sinks::nats {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSlice = std::chrono::milliseconds(100);

// {"subject": "..."}: a valid subject may still hold a quote or a backslash.
std::string names_request(const std::string& subject) {
  std::string body = "{\"subject\":\"";
  for (const char c : subject) {
    if (c == '"' || c == '\\') {
      body += '\\';
      body += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      body += esc;
    } else {
      body += c;
    }
  }
  return body + "\"}";
}

// The JSON string value that follows `key` (no unescaping: only for error texts), or "".
std::string string_after(std::string_view text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return {};
  const auto open = text.find('"', at + key.size());
  if (open == std::string_view::npos) return {};
  auto close = open + 1;
  while (close < text.size() && text[close] != '"') close += text[close] == '\\' ? 2 : 1;
  return std::string(text.substr(open + 1, std::min(close, text.size()) - open - 1));
}

}  // namespace

StreamLookupResult read_stream_names(const std::string& answer) {
  const std::string_view text = answer;
  // An error answer (JetStream not enabled for the account, not ready, ...): no verdict.
  if (text.find("\"error\":") != std::string_view::npos) {
    std::string why = string_after(text, "\"description\":");
    return {StreamLookup::kUnknown, "JetStream API error: " + (why.empty() ? answer : why)};
  }
  const auto key = text.find("\"streams\":");
  if (key != std::string_view::npos) {
    auto at = key + 10;
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    const std::string_view rest = text.substr(at);
    if (rest.rfind("null", 0) == 0) return {StreamLookup::kMissing, {}};
    if (!rest.empty() && rest[0] == '[') {
      const auto next = rest.find_first_not_of(" \t\r\n", 1);
      if (next != std::string_view::npos && rest[next] == ']') return {StreamLookup::kMissing, {}};
      if (next != std::string_view::npos && rest[next] == '"') {
        return {StreamLookup::kFound, "stream " + string_after(rest, "[")};
      }
    }
  }
  return {StreamLookup::kUnknown, "unexpected JetStream answer: " + answer.substr(0, 200)};
}

StreamLookupResult find_stream(natsConnection* nc, const std::string& subject,
                               Clock::time_point deadline,
                               const std::function<bool()>& keep_waiting) {
  if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED) {
    return {StreamLookup::kUnknown, "not connected"};
  }
  if (Clock::now() >= deadline) return {StreamLookup::kUnknown, "no time left in the batch"};
  StreamLookupResult result{StreamLookup::kUnknown, "no answer in time"};
  natsInbox* inbox = nullptr;
  natsSubscription* sub = nullptr;
  const std::string body = names_request(subject);
  natsStatus s = natsInbox_Create(&inbox);
  if (s == NATS_OK) s = natsConnection_SubscribeSync(&sub, nc, inbox);
  if (s == NATS_OK) s = natsSubscription_AutoUnsubscribe(sub, 1);
  if (s == NATS_OK) {
    s = natsConnection_PublishRequest(nc, "$JS.API.STREAM.NAMES", inbox, body.data(),
                                      static_cast<int>(body.size()));
  }
  while (s == NATS_OK) {
    // Asked before each wait, so that the caller's observer hears from us every 100 ms.
    if (!keep_waiting()) {
      result.detail = "the relay stopped waiting";
      break;
    }
    // The answer would have come over the lost connection: no use waiting out the deadline.
    if (natsConnection_Status(nc) != NATS_CONN_STATUS_CONNECTED) {
      result.detail = "the connection was lost";
      break;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    const auto slice = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min<Clock::duration>(left, kSlice));
    natsMsg* msg = nullptr;
    s = natsSubscription_NextMsg(&msg, sub, std::max<std::int64_t>(1, slice.count()));
    if (s == NATS_OK) {
      const char* data = natsMsg_GetData(msg);
      result = read_stream_names(std::string(data != nullptr ? data : "",
                                             static_cast<std::size_t>(natsMsg_GetDataLength(msg))));
      natsMsg_Destroy(msg);
      break;
    }
    if (s == NATS_TIMEOUT) s = NATS_OK;
  }
  if (s != NATS_OK) {
    result = {StreamLookup::kUnknown,
              s == NATS_NO_RESPONDERS ? "no responders" : natsStatus_GetText(s)};
  }
  natsSubscription_Destroy(sub);  // removes the interest if no answer came
  natsInbox_Destroy(inbox);
  return result;
}

}  // namespace outbox::sinks::nats
