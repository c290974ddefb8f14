// Loads the built plugin libraries the way the relay does (dlopen + outbox_sink_init, through
// the C interface and sinks::PluginHost) and drives the C++ sinks inside them: a C++
// ConfigError thrown in a plugin arrives out here as the C status CONFIG_ERROR, turned back
// into a ConfigError by the host.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "sinks/host/plugin_host.hpp"

#ifndef OUTBOX_SINK_LIB_DIR
#error "OUTBOX_SINK_LIB_DIR must name the directory of outbox_sink_*.so"
#endif

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;

class Library {
 public:
  explicit Library(const std::string& name) {
    const std::string path = std::string(OUTBOX_SINK_LIB_DIR) + "/outbox_sink_" + name + ".so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      error_ = dlerror();
      return;
    }
    auto init = reinterpret_cast<OutboxSinkInitFn>(dlsym(handle_, OUTBOX_SINK_INIT_SYMBOL));
    if (init == nullptr) {
      error_ = dlerror();
      return;
    }
    table_ = init();
    host_.emplace(table_, name);
  }
  ~Library() {
    host_.reset();
    if (handle_ != nullptr) dlclose(handle_);
  }
  const PluginHost* get() const { return host_ ? &*host_ : nullptr; }
  const OutboxSinkCallbacks* table() const { return table_; }
  const std::string& error() const { return error_; }

 private:
  void* handle_ = nullptr;
  const OutboxSinkCallbacks* table_ = nullptr;
  std::optional<PluginHost> host_;
  std::string error_;
};

TEST(SinkPlugin, Null) {
  Library lib("null");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_EQ(lib.table()->abi_version, static_cast<std::uint32_t>(OUTBOX_SINK_ABI_VERSION));
  EXPECT_EQ(lib.table()->size, sizeof(OutboxSinkCallbacks));
  EXPECT_STREQ(lib.table()->name, "null");
  {
    auto sink = lib.get()->create({});
    Message m;
    m.payload = "{}";
    std::vector<Outcome> outcomes(1);
    sink->send({m}, outcomes, 1s);
    EXPECT_EQ(outcomes[0].delivery, Delivery::kAcked);
  }
  EXPECT_THROW(lib.get()->create({{"fail_every", "0"}}), ConfigError);
  ASSERT_EQ(lib.get()->options().count, 7u);
  EXPECT_STREQ(lib.get()->options().specs[0].name, "fail_every");
  EXPECT_EQ(lib.get()->options().specs[0].kind, OptionKind::kInteger);
  EXPECT_STREQ(lib.get()->options().specs[3].name, "delay_ms");
}

// Rejections and deferrals keep their kind and error through both adapters; a pipelined pair of
// batches finishes oldest first.
TEST(SinkPlugin, NullOutcomesCrossTheInterface) {
  Library lib("null");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  auto sink = lib.get()->create({{"reject_aggregateid", "bad"}, {"reject_times", "5"}});
  std::vector<Message> first(3), second(1);
  for (auto& m : first) m.aggregatetype = "order";
  first[0].aggregateid = "ok";
  first[1].aggregateid = "bad";
  first[2].aggregateid = "bad";
  second[0].aggregatetype = "order";
  second[0].aggregateid = "bad";
  std::vector<Outcome> out1(3), out2(1);
  sink->start(first, out1, 1s);
  sink->start(second, out2, 1s);
  sink->finish();
  EXPECT_EQ(out1[0].delivery, Delivery::kAcked);
  EXPECT_EQ(out1[1].delivery, Delivery::kRejected);
  EXPECT_FALSE(out1[1].error.empty());
  EXPECT_EQ(out1[2].delivery, Delivery::kDeferred);
  sink->finish();
  EXPECT_NE(out2[0].delivery, Delivery::kAcked);
}

TEST(SinkPlugin, Kafka) {
  Library lib("kafka");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_STREQ(lib.table()->name, "kafka");
  try {
    lib.get()->create({{"topic.template", "x"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bootstrap.servers is required"), std::string::npos);
  }
  EXPECT_THROW(lib.get()->create({{"bootstrap.servers", "127.0.0.1:1"}, {"no.such.thing", "1"}}),
               ConfigError);
  // The plugin refuses what its declaration leaves out, whoever loads it.
  EXPECT_GT(lib.get()->options().count, 50u);
  try {
    lib.get()->create({{"bootstrap.servers", "127.0.0.1:1"}, {"plugin.library.paths", "x"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "sink \"kafka\" has no option \"plugin.library.paths\"");
  }
  // Creating it starts librdkafka's threads; nothing is connected until a message is sent.
  auto sink = lib.get()->create({{"bootstrap.servers", "127.0.0.1:1"}});
  EXPECT_TRUE(sink->usable());
  EXPECT_EQ(sink->describe(),
            "kafka bootstrap.servers=127.0.0.1:1 topic.template=outbox.event.${aggregatetype}");
  EXPECT_EQ(sink->max_message_bytes(), 1000000u);  // librdkafka's message.max.bytes
}

TEST(SinkPlugin, Http) {
  Library lib("http");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_STREQ(lib.table()->name, "http");
  try {
    lib.get()->create({{"url", "gopher://x/"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "url: must start with http:// or https://");
  }
  EXPECT_THROW(lib.get()->create({{"url", "http://x/"}, {"no.such.thing", "1"}}), ConfigError);
  auto sink = lib.get()->create({{"url", "http://127.0.0.1:1/${aggregatetype}"}});
  EXPECT_EQ(sink->describe(),
            "http url=http://127.0.0.1:1/${aggregatetype} timeout.ms=10000 max_concurrency=8 "
            "straggler.timeout.ms=200 "
            "unsigned");
}

// Only refused options: a created NATS sink would leave cnats callbacks into the library,
// which the Library closes at the end of the test.
TEST(SinkPlugin, Nats) {
  Library lib("nats");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_STREQ(lib.table()->name, "nats");
  try {
    lib.get()->create({{"subject.template", "x"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("servers is required"), std::string::npos);
  }
  try {
    lib.get()->create({{"servers", "nats://127.0.0.1:1"}, {"no.such.thing", "1"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "sink \"nats\" has no option \"no.such.thing\"");
  }
  EXPECT_EQ(lib.get()->options().count, 11u);
}

}  // namespace
