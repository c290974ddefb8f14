// The HTTP webhook sink: each event is one POST of its payload to the URL template's URL,
// signed as Standard Webhooks 1.0 prescribes (webhook_signature.hpp), over libcurl's multi
// interface. See docs/sink-options.md for the headers and how responses count.
//
// Sending is synchronous (send(); the default start() calls it). Per key (aggregatetype,
// aggregateid) a request starts only after the previous one of its key got a 2xx; different
// keys run concurrently, up to max_concurrency requests at once. Once a key's message is not
// delivered, its later messages in the batch are kDeferred. Once a request is unavailable
// (timeout, refused connection, 408, 429, 5xx), no new request starts in the batch: what is
// not started is kUnavailable (the receiver is in trouble; the relay backs off).
//
// One curl multi handle lives as long as the sink: its connection cache keeps connections
// alive across batches (at most max_concurrency, also per host).
//
// Threads: curl resolves names on a thread of its own (Debian's libcurl is built with the
// threaded resolver, "AsynchDNS"), started inside curl_multi_perform(). send() runs with the
// backend's signal mask, so the sink blocks every signal around the curl calls that may start
// such a thread: PostgreSQL's handlers must run on the backend's thread only.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "sinks/http_options.hpp"
#include "sinks/sink.hpp"

namespace outbox::sinks {

class HttpSink final : public Sink {
 public:
  // Throws ConfigError for bad options.
  explicit HttpSink(const Options& options);
  ~HttpSink() override;
  HttpSink(const HttpSink&) = delete;
  HttpSink& operator=(const HttpSink&) = delete;

  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds timeout) override;
  std::string describe() const override { return settings_.description; }

  // Most bytes of a response body kept (for the error of a rejection).
  static constexpr std::size_t kMaxBodyBytes = 4096;
  // Most bytes of it shown in an error.
  static constexpr std::size_t kMaxExcerptBytes = 200;
  // Longest wait a Retry-After may ask for (seconds); a longer one is cut to this.
  static constexpr long kMaxRetryAfterSeconds = 3600;

  // How a finished request counts: `status` 0 when curl failed with `code`.
  static Delivery classify(CURLcode code, long status);
  // The body as it may appear in an error: at most kMaxExcerptBytes, printable ASCII only.
  static std::string excerpt(const std::string& body);

 private:
  struct Request;
  // Sets up the request of `message`; false and `error` when it cannot be sent as is.
  bool prepare(const Message& message, Request& request, std::string& error) const;
  // How a finished request counts; may set wait_until_.
  Outcome outcome_of(Request& request, CURLcode code);

  HttpSettings settings_;
  CURLM* multi_ = nullptr;
  // Until then, every send() fails at once (the receiver's Retry-After).
  std::time_t wait_until_ = 0;
};

std::unique_ptr<Sink> create_http_sink(const Options& options);

}  // namespace outbox::sinks
