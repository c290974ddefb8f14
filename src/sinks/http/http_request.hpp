// The HTTP sink's transfer machinery: one POST of one event as a curl easy handle, and what
// its answer means (http_request.cpp). The batch bookkeeping is in http_sink.cpp.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

// One request: its easy handle and what curl reads while it is in flight. It owns a copy of
// what it sends, because a straggler outlives its batch's messages (http_sink.hpp).
struct HttpRequest {
  static constexpr std::uint64_t kStraggler = ~std::uint64_t{0};  // `batch` of a given-up one

  std::uint64_t batch = 0;  // the started batch it belongs to (its sequence number)
  std::size_t index = 0;    // its message in that batch
  std::chrono::steady_clock::time_point started;
  std::string id;                           // the event's id
  std::pair<std::string, std::string> key;  // (aggregatetype, aggregateid)
  std::string payload;
  CURLM* multi = nullptr;  // set once the handle is added
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string url;
  std::string body;  // the response's, at most HttpSink::kMaxBodyBytes
  char error[CURL_ERROR_SIZE] = {0};

  HttpRequest() = default;
  HttpRequest(const HttpRequest&) = delete;
  HttpRequest& operator=(const HttpRequest&) = delete;
  ~HttpRequest() {
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

// What a finished request means.
struct HttpAnswer {
  Outcome outcome;
  // Not empty when the whole endpoint is in trouble (it cannot be reached, or it asked to
  // retry later): no new request starts in the started batches, and this is the error of
  // those not sent.
  std::string stop;
  std::time_t wait_until = 0;  // the receiver's Retry-After, when it gave one (0: none)
};

// `t` as 2025-12-01T16:41:02Z, for errors.
std::string http_utc_text(std::time_t t);

}  // namespace outbox::sinks
