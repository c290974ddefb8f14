// The messages between the relay's ProcessSink and the sink host process (outbox_sink_host),
// over a socketpair. Plain C++, no PostgreSQL; unit-tested (test/unit/wire_test.cpp).
//
// A frame is a 4-byte body length, a 1-byte type, then the body. Integers are in the host's
// byte order: both ends are the same build on the same machine. Strings are a 4-byte length and
// the bytes. Every decoder checks each length against what is left, so a truncated or garbled
// frame becomes a WireError, never a read past the buffer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks::wire {

constexpr std::size_t kHeaderBytes = 5;
constexpr std::uint32_t kMaxBodyBytes = 1u << 30;  // a batch is at most outbox.batch_max_bytes

enum class Type : std::uint8_t {
  // relay -> host
  kCreate = 1,       // library, name, resolved options
  kStart = 2,        // one batch
  kFinish = 3,       // wait for the oldest started batch
  kTakeLog = 4,      // the sink's log lines
  kStopWaiting = 5,  // the relay's observer said stop (only while a finish is under way)
  // host -> relay: one reply per request, in order, each a Reply first
  kCreated = 20,      // + description, max_message_bytes
  kStarted = 21,      // (Reply only)
  kFinished = 22,     // + the oldest batch's outcomes
  kLog = 23,          // + log lines
  kClientError = 24,  // while finishing: the client library's latest error
};

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { raw(&v, sizeof(v)); }
  void u64(std::uint64_t v) { raw(&v, sizeof(v)); }
  void i64(std::int64_t v) { raw(&v, sizeof(v)); }
  void str(std::string_view s);
  // The frame: header then body; the Writer is empty afterwards.
  std::string frame(Type type);
  std::size_t size() const { return out_.size(); }

 private:
  void raw(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// Reads a frame's body; the views it returns point into that body.
class Reader {
 public:
  explicit Reader(std::string_view body) : in_(body) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::uint64_t u64();
  std::int64_t i64();
  std::string_view str();
  bool done() const { return in_.empty(); }
  // Throws unless the whole body was read.
  void end() const;

 private:
  void raw(void* p, std::size_t n);
  std::string_view in_;
};

// A frame's header: its body's length (checked against kMaxBodyBytes) and type.
std::uint32_t body_length(const char (&header)[kHeaderBytes]);

// How a request went, first in every reply. kConfigError and kFailed carry the sink's message:
// the relay throws ConfigError or std::runtime_error with it.
enum class Status : std::uint8_t { kOk = 0, kFailed = 1, kConfigError = 2 };
struct Reply {
  Status status = Status::kOk;
  std::string error;
  bool usable = true;  // the sink's usable() after the request
};
void encode(Writer& w, const Reply& reply);
Reply decode_reply(Reader& r);

struct CreateRequest {
  std::string library;  // the path of outbox_sink_<name>.so
  std::string name;
  Options options;  // resolved: files and secrets already read by the relay
};
void encode(Writer& w, const CreateRequest& request);
CreateRequest decode_create(Reader& r);

struct Created {
  std::string description;
  std::uint64_t max_message_bytes = 0;
};
void encode(Writer& w, const Created& created);
Created decode_created(Reader& r);

// A batch to start: its timeout and messages. Decoded messages point into the frame's body.
void encode_batch(Writer& w, std::chrono::milliseconds timeout,
                  const std::vector<Message>& messages);
std::chrono::milliseconds decode_batch(Reader& r, std::vector<Message>& messages);

void encode(Writer& w, const std::vector<Outcome>& outcomes);
// Into outcomes[0, count): throws unless the frame holds `count` of them (the batch's size).
void decode_outcomes(Reader& r, std::vector<Outcome>& outcomes, std::size_t count);

void encode(Writer& w, const std::vector<LogLine>& lines);
std::vector<LogLine> decode_log(Reader& r);

}  // namespace outbox::sinks::wire
