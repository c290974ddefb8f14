// The HTTP webhook sink: each event is one POST of its payload to the URL template's URL,
// signed as Standard Webhooks 1.0 prescribes (webhook_signature.hpp), over libcurl's multi
// interface. See docs/sink-options.md for the headers and how responses count.
//
// Pipelining: start() hands a batch's requests to the multi handle, lets curl move them as
// far as it can without waiting, and returns; finish() waits for the oldest started batch
// (until its start() + timeout), asking the relay's observer at least every 100 ms. Transfers
// progress only inside start() and finish(). send() is start() + finish().
//
// Per key (aggregatetype, aggregateid) a request starts only after the previous one of its
// key got a 2xx, in its batch or in an earlier started batch: one key never has two requests
// in flight. Different keys run concurrently, up to max_concurrency requests at once, the
// oldest batch's first.
//
// Failures (http_request.cpp classifies the answers):
//  - A request that fails (5xx, 408, 429, a timeout: kUnavailable; a 4xx: kRejected) holds
//    back only its key: its later messages, in the batch and in a batch started before it
//    failed, are kDeferred ("not sent: an earlier event of its key was not delivered (...)").
//    Other keys go on.
//  - Trouble of the whole endpoint (a name that does not resolve, a refused connection, a
//    TLS failure, a connection timeout; or a 429/503 with Retry-After) stops the started
//    batches: requests in flight settle by their own answers, the failing one is
//    kUnavailable, and what is not started yet is kDeferred with the reason ("not sent: the
//    receiver asked to retry after 30 s"). After a Retry-After, every batch started before
//    that time is kUnavailable at once, nothing sent.
//
// Stragglers (http_stragglers.cpp): once some of the oldest batch are acknowledged, nothing
// else of it can start, and each of its requests still in flight has waited
// straggler.timeout.ms (and 4 times the typical answer time), finish() stops waiting for
// them: they settle as kUnavailable, so only their keys wait, and the batch ends. A request
// given up so goes on until timeout.ms; while it does, nothing more of its key is sent (its
// own event again: kUnavailable; a later one: kDeferred), so the receiver never sees a later
// event of the key before it. If it is answered 2xx, its event id is remembered
// (late_acks.hpp), and the relay's retry of that event is kAcked without a second request.
//
// One curl multi handle lives as long as the sink: its connection cache keeps connections
// alive across batches (at most max_concurrency, also per host).
//
// Threads: curl resolves names on a thread of its own (Debian's libcurl is built with the
// threaded resolver, "AsynchDNS"), started inside curl_multi_perform(). start() and finish()
// run with the backend's signal mask, so the sink blocks every signal around the curl calls
// that may start such a thread: PostgreSQL's handlers must run on the backend's thread only.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sinks/http/http_options.hpp"
#include "sinks/http/http_request.hpp"
#include "sinks/http/late_acks.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class HttpSink final : public Sink {
 public:
  // Throws ConfigError for bad options.
  explicit HttpSink(const Options& options);
  ~HttpSink() override;
  HttpSink(const HttpSink&) = delete;
  HttpSink& operator=(const HttpSink&) = delete;

  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds timeout) override;
  void finish() override;
  std::string describe() const override { return settings_.description; }

  // Most bytes of a response body kept (for the error of a rejection).
  static constexpr std::size_t kMaxBodyBytes = 4096;
  // Most bytes of it shown in an error.
  static constexpr std::size_t kMaxExcerptBytes = 200;
  // Longest wait a Retry-After may ask for (seconds); a longer one is cut to this.
  static constexpr long kMaxRetryAfterSeconds = 3600;

  // How a finished request counts: `status` 0 when curl failed with `code`.
  static Delivery classify(CURLcode code, long status);
  // Whether curl's `code` means the endpoint cannot be reached at all (name, connection,
  // TLS), rather than trouble of one request.
  static bool endpoint_failed(CURLcode code);
  // The body as it may appear in an error: at most kMaxExcerptBytes, printable ASCII only.
  static std::string excerpt(const std::string& body);

 private:
  struct Batch;  // http_sink.cpp

  // http_request.cpp: sets up the request of `message` on request.easy; false and `error`
  // when it cannot be sent as is.
  bool prepare(const Message& message, HttpRequest& request, std::string& error) const;
  // http_request.cpp: what a finished request means.
  HttpAnswer answer_of(HttpRequest& request, CURLcode code) const;

  Batch* batch(std::uint64_t seq);
  // Where each key's first message of `b` waits: behind an earlier batch, or ready.
  void link(Batch& b, const std::vector<std::size_t>& heads);
  // Sets message i's outcome; releases the next of its key, or defers the rest of its key.
  void settle(Batch& b, std::size_t i, Outcome outcome);
  // Starts ready requests, oldest batch first; returns how many.
  std::size_t pump();
  // Lets curl move every transfer without waiting and settles the finished ones; returns
  // how many finished. Throws when the multi handle fails.
  std::size_t perform();
  void complete(CURL* easy, CURLcode code);
  // An easy handle for a new request: a spare one (reset) or a new one.
  CURL* spare_easy();
  // Takes a finished request's handle out of the multi handle, and keeps it as a spare.
  void recycle(HttpRequest& request);
  // http_stragglers.cpp: gives up on the in-flight requests of `b` when they qualify (above);
  // whether it did.
  bool give_up_stragglers(Batch& b);
  // http_stragglers.cpp: a given-up request finished with `answer`.
  void straggler_done(const HttpRequest& request, const HttpAnswer& answer);
  // http_stragglers.cpp: the outcome of a message without sending it (its key has a given-up
  // request in flight, or it was acknowledged late); false: send it.
  bool settled_without_request(Batch& b, std::size_t i);
  // How long finish() may sleep before give_up_stragglers() must look again.
  long straggler_poll_ms() const;
  // pump() and perform() while they make progress, a few rounds at most.
  void progress();
  // No new request starts in any started batch; those not started get `reason`.
  void stop_all(const std::string& reason);
  // Settles every unsettled message of `b` as kUnavailable with `error` (in-flight ones are
  // aborted); the rest of their keys is deferred, also in later batches.
  void abandon(Batch& b, const std::string& error);
  // Removes the requests of `b` from the multi handle, without settling them.
  void drop_requests(const Batch& b) noexcept;

  HttpSettings settings_;
  CURLM* multi_ = nullptr;
  // Until then, every start() fails at once (the receiver's Retry-After).
  std::time_t wait_until_ = 0;
  std::deque<std::unique_ptr<Batch>> batches_;  // started, not finished; oldest first
  std::map<CURL*, std::unique_ptr<HttpRequest>> active_;
  std::uint64_t next_seq_ = 0;
  std::string last_error_;  // the latest unavailable answer, for the observer ("" after a 2xx)
  // Keys with a given-up request in flight, with its event id (one per key: the per-key rule).
  std::map<std::pair<std::string, std::string>, std::string> straggling_;
  LateAcks late_acks_;
  std::vector<CURL*> spare_;  // easy handles of finished requests, at most max_concurrency
  std::chrono::microseconds typical_{0};  // moving average of the answer time
};

std::unique_ptr<Sink> create_http_sink(const Options& options);

}  // namespace outbox::sinks
