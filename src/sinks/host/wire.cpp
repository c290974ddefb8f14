#include "sinks/host/wire.hpp"

#include <cstring>

namespace outbox::sinks::wire {

void Writer::str(std::string_view s) {
  if (s.size() > kMaxBodyBytes) throw WireError("a string is too long for a frame");
  u32(static_cast<std::uint32_t>(s.size()));
  out_.append(s.data(), s.size());
}

std::string Writer::frame(Type type) {
  if (out_.size() > kMaxBodyBytes) throw WireError("a frame is too large");
  std::string frame;
  frame.reserve(kHeaderBytes + out_.size());
  const auto length = static_cast<std::uint32_t>(out_.size());
  frame.append(reinterpret_cast<const char*>(&length), sizeof(length));
  frame.push_back(static_cast<char>(type));
  frame.append(out_);
  out_.clear();
  return frame;
}

void Reader::raw(void* p, std::size_t n) {
  if (in_.size() < n) throw WireError("a frame ends too early");
  std::memcpy(p, in_.data(), n);
  in_.remove_prefix(n);
}

std::uint8_t Reader::u8() {
  std::uint8_t v;
  raw(&v, sizeof(v));
  return v;
}
std::uint32_t Reader::u32() {
  std::uint32_t v;
  raw(&v, sizeof(v));
  return v;
}
std::uint64_t Reader::u64() {
  std::uint64_t v;
  raw(&v, sizeof(v));
  return v;
}
std::int64_t Reader::i64() {
  std::int64_t v;
  raw(&v, sizeof(v));
  return v;
}

std::string_view Reader::str() {
  const std::uint32_t n = u32();
  if (in_.size() < n) throw WireError("a frame ends inside a string");
  std::string_view s = in_.substr(0, n);
  in_.remove_prefix(n);
  return s;
}

void Reader::end() const {
  if (!in_.empty()) throw WireError("a frame has bytes left over");
}

std::uint32_t body_length(const char (&header)[kHeaderBytes]) {
  std::uint32_t length;
  std::memcpy(&length, header, sizeof(length));
  if (length > kMaxBodyBytes)
    throw WireError("a frame announces " + std::to_string(length) +
                    " bytes, more than a frame may hold");
  return length;
}

void encode(Writer& w, const Reply& reply) {
  w.u8(static_cast<std::uint8_t>(reply.status));
  w.str(reply.error);
  w.u8(reply.usable ? 1 : 0);
}

Reply decode_reply(Reader& r) {
  Reply reply;
  const std::uint8_t status = r.u8();
  if (status > static_cast<std::uint8_t>(Status::kConfigError)) {
    throw WireError("a reply has the unknown status " + std::to_string(status));
  }
  reply.status = static_cast<Status>(status);
  reply.error = r.str();
  reply.usable = r.u8() != 0;
  return reply;
}

namespace {
void encode_options(Writer& w, const Options& options) {
  w.u32(static_cast<std::uint32_t>(options.size()));
  for (const auto& [key, value] : options) {
    w.str(key);
    w.str(value);
  }
}
}  // namespace

void encode(Writer& w, const CreateRequest& request) {
  w.str(request.library);
  w.str(request.name);
  encode_options(w, request.options);
}

CreateRequest decode_create(Reader& r) {
  CreateRequest request;
  request.library = r.str();
  request.name = r.str();
  const std::uint32_t count = r.u32();
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string key(r.str());
    request.options.emplace_back(std::move(key), std::string(r.str()));
  }
  r.end();
  return request;
}

void encode(Writer& w, const Created& created) {
  w.str(created.description);
  w.u64(created.max_message_bytes);
}

Created decode_created(Reader& r) {
  Created created;
  created.description = r.str();
  created.max_message_bytes = r.u64();
  r.end();
  return created;
}

void encode_batch(Writer& w, std::chrono::milliseconds timeout,
                  const std::vector<Message>& messages) {
  w.i64(timeout.count());
  w.u32(static_cast<std::uint32_t>(messages.size()));
  for (const Message& m : messages) {
    w.str(m.id);
    w.str(m.aggregatetype);
    w.str(m.aggregateid);
    w.str(m.type);
    w.str(m.payload);
    w.u32(static_cast<std::uint32_t>(m.headers.size()));
    for (const auto& [name, value] : m.headers) {
      w.str(name);
      w.str(value);
    }
    w.i64(m.created_at_unix_us);
  }
}

std::chrono::milliseconds decode_batch(Reader& r, std::vector<Message>& messages) {
  const std::chrono::milliseconds timeout(r.i64());
  const std::uint32_t count = r.u32();
  messages.clear();
  // Each message takes at least 32 bytes: a garbled count cannot make us reserve gigabytes.
  messages.reserve(std::min<std::size_t>(count, kMaxBodyBytes / 32));
  for (std::uint32_t i = 0; i < count; ++i) {
    Message m;
    m.id = r.str();
    m.aggregatetype = r.str();
    m.aggregateid = r.str();
    m.type = r.str();
    m.payload = r.str();
    const std::uint32_t headers = r.u32();
    for (std::uint32_t h = 0; h < headers; ++h) {
      std::string_view name = r.str();
      m.headers.emplace_back(name, r.str());
    }
    m.created_at_unix_us = r.i64();
    messages.push_back(std::move(m));
  }
  r.end();
  return timeout;
}

void encode(Writer& w, const std::vector<Outcome>& outcomes) {
  w.u32(static_cast<std::uint32_t>(outcomes.size()));
  for (const Outcome& o : outcomes) {
    w.u8(static_cast<std::uint8_t>(o.delivery));
    w.str(o.error);
  }
}

void decode_outcomes(Reader& r, std::vector<Outcome>& outcomes, std::size_t count) {
  const std::uint32_t sent = r.u32();
  if (sent != count || outcomes.size() < count) {
    throw WireError("a batch of " + std::to_string(count) + " messages came back with " +
                    std::to_string(sent) + " outcomes");
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t delivery = r.u8();
    if (delivery > static_cast<std::uint8_t>(Delivery::kDeferred)) {
      throw WireError("an outcome has the unknown delivery " + std::to_string(delivery));
    }
    outcomes[i].delivery = static_cast<Delivery>(delivery);
    outcomes[i].error = r.str();
  }
}

void encode(Writer& w, const std::vector<LogLine>& lines) {
  w.u32(static_cast<std::uint32_t>(lines.size()));
  for (const LogLine& line : lines) {
    w.u8(static_cast<std::uint8_t>(line.level));
    w.str(line.text);
  }
}

std::vector<LogLine> decode_log(Reader& r) {
  std::vector<LogLine> lines;
  const std::uint32_t count = r.u32();
  for (std::uint32_t i = 0; i < count; ++i) {
    LogLine line;
    line.level = r.u8();
    line.text = r.str();
    lines.push_back(std::move(line));
  }
  r.end();
  return lines;
}

}  // namespace outbox::sinks::wire
