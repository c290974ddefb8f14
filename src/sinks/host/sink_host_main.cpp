// outbox_sink_host: runs one sink for a relay, in a process of its own
// (sinks/host/process_sink.hpp). Started by the relay with fork + exec, its socket as file
// descriptor 3. It loads the sink's library as the relay would (dlopen, then sinks::PluginHost),
// creates the sink from the resolved options the relay sends, and answers the relay's requests in
// order, making the same calls on the sink. It ends when the socket closes (after destroying the
// sink, which flushes), and is killed when the relay dies (PR_SET_PDEATHSIG).
#include <dlfcn.h>

#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "sinks/host/channel.hpp"
#include "sinks/host/plugin_host.hpp"
#include "sinks/host/wire.hpp"

namespace {

using namespace outbox::sinks;
using Clock = Channel::Clock;

constexpr int kSocketFd = 3;
// How long a frame to the relay may take to leave: a relay that reads nothing is gone or hung.
constexpr auto kSendPatience = std::chrono::seconds(30);

// A started batch: the frame it came in, which its messages point into, and its outcomes.
struct Batch {
  std::string body;
  std::vector<Message> messages;
  std::vector<Outcome> outcomes;
};

void send_or_exit(Channel& channel, const std::string& frame) {
  if (channel.send(frame, Clock::now() + kSendPatience) != Channel::Result::kFrame) std::_Exit(3);
}

// A reply's body starts with how the request went; the caller may add to it, then sends it.
wire::Writer head(wire::Status status, const std::string& error, bool usable) {
  wire::Writer w;
  wire::encode(w, wire::Reply{status, error, usable});
  return w;
}

void reply(Channel& channel, wire::Type type, wire::Status status, const std::string& error,
           bool usable) {
  send_or_exit(channel, head(status, error, usable).frame(type));
}

// The sink's observer: forwards the client library's error to the relay, and says stop once
// the relay's observer did (a kStopWaiting frame, read without waiting).
class Observer final : public WaitObserver {
 public:
  explicit Observer(Channel& channel) : channel_(channel) {}
  void begin() { stopped_ = false; }

  bool keep_waiting(std::string_view client_error) noexcept override {
    try {
      if (client_error != sent_) {
        sent_ = client_error;
        wire::Writer w;
        w.str(sent_);
        send_or_exit(channel_, w.frame(wire::Type::kClientError));
      }
      while (!stopped_) {
        wire::Type type{};
        const Channel::Result got = channel_.receive(type, scratch_, Clock::now());
        if (got == Channel::Result::kTimeout) break;
        // The relay sends nothing else while it waits; a closed socket: it is gone.
        if (got == Channel::Result::kClosed || type != wire::Type::kStopWaiting) std::_Exit(3);
        stopped_ = true;
      }
      return !stopped_;
    } catch (...) {
      return false;
    }
  }

 private:
  Channel& channel_;
  std::string sent_;
  std::string scratch_;
  bool stopped_ = false;
};

wire::Status status_of(const std::exception& e) {
  return dynamic_cast<const ConfigError*>(&e) != nullptr ? wire::Status::kConfigError
                                                         : wire::Status::kFailed;
}

std::unique_ptr<Sink> create(Channel& channel) {
  wire::Type type{};
  std::string body;
  if (channel.receive(type, body, Clock::time_point::max()) != Channel::Result::kFrame ||
      type != wire::Type::kCreate) {
    std::_Exit(2);
  }
  wire::Reader r(body);
  const wire::CreateRequest request = wire::decode_create(r);
  std::unique_ptr<Sink> sink;
  try {
    // Stays loaded for the process, as in the relay.
    void* handle = dlopen(request.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error("cannot load " + request.library);
    auto init = reinterpret_cast<OutboxSinkInitFn>(dlsym(handle, OUTBOX_SINK_INIT_SYMBOL));
    if (init == nullptr) throw std::runtime_error(request.library + " is not an outbox sink");
    PluginHost host(init(), request.name);
    sink = host.create(request.options);
  } catch (const std::exception& e) {
    reply(channel, wire::Type::kCreated, status_of(e), e.what(), false);
    return nullptr;
  }
  wire::Writer w = head(wire::Status::kOk, {}, sink->usable());
  wire::encode(w, wire::Created{sink->describe(), sink->max_message_bytes()});
  send_or_exit(channel, w.frame(wire::Type::kCreated));
  return sink;
}

void serve(Channel& channel, Sink& sink, Observer& observer) {
  std::deque<Batch> started;  // in place until finished: the sink may write their outcomes
  wire::Type type{};
  std::string body;
  while (channel.receive(type, body, Clock::time_point::max()) == Channel::Result::kFrame) {
    observer.begin();
    if (type == wire::Type::kStopWaiting) continue;  // came after the wait it was for ended
    if (type == wire::Type::kStart) {
      Batch& batch = started.emplace_back();
      batch.body.swap(body);
      wire::Reader r(batch.body);
      const std::chrono::milliseconds timeout = wire::decode_batch(r, batch.messages);
      batch.outcomes.assign(batch.messages.size(), Outcome{});
      try {
        sink.start(batch.messages, batch.outcomes, timeout);
      } catch (const std::exception& e) {
        started.pop_back();
        reply(channel, wire::Type::kStarted, status_of(e), e.what(), sink.usable());
        continue;
      }
      reply(channel, wire::Type::kStarted, wire::Status::kOk, {}, sink.usable());
    } else if (type == wire::Type::kFinish) {
      if (started.empty()) std::_Exit(3);  // the relay finishes only what it started
      try {
        sink.finish();
      } catch (const std::exception& e) {
        started.pop_front();
        reply(channel, wire::Type::kFinished, status_of(e), e.what(), sink.usable());
        continue;
      }
      wire::Writer w = head(wire::Status::kOk, {}, sink.usable());
      wire::encode(w, started.front().outcomes);
      started.pop_front();
      send_or_exit(channel, w.frame(wire::Type::kFinished));
    } else if (type == wire::Type::kTakeLog) {
      wire::Writer w = head(wire::Status::kOk, {}, sink.usable());
      wire::encode(w, sink.take_log());
      send_or_exit(channel, w.frame(wire::Type::kLog));
    } else {
      std::_Exit(3);
    }
  }
}

}  // namespace

int main() {
  try {
    Channel channel(kSocketFd);
    std::unique_ptr<Sink> sink = create(channel);
    if (!sink) return 0;
    Observer observer(channel);
    sink->observe_waits(&observer);
    serve(channel, *sink, observer);
    sink.reset();  // flushes, stops the library's threads
  } catch (...) {
    return 4;  // a malformed frame, out of memory: the relay sees the socket close
  }
  return 0;
}
