// Loads the built plugin libraries the way the relay does (dlopen + outbox_sink_plugin_v1)
// and checks that a ConfigError thrown inside a plugin is caught by its type out here, even
// though the plugins hide every symbol but the entry point.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "sinks/sink.hpp"

#ifndef OUTBOX_SINK_LIB_DIR
#error "OUTBOX_SINK_LIB_DIR must name the directory of outbox_sink_*.so"
#endif

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;

class Plugin {
 public:
  explicit Plugin(const std::string& name) {
    const std::string path = std::string(OUTBOX_SINK_LIB_DIR) + "/outbox_sink_" + name + ".so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      error_ = dlerror();
      return;
    }
    auto fn = reinterpret_cast<outbox_sink_plugin_v1_fn>(dlsym(handle_, "outbox_sink_plugin_v1"));
    if (fn == nullptr) {
      error_ = dlerror();
      return;
    }
    plugin_ = fn();
  }
  ~Plugin() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  const PluginV1* get() const { return plugin_; }
  const std::string& error() const { return error_; }

 private:
  void* handle_ = nullptr;
  const PluginV1* plugin_ = nullptr;
  std::string error_;
};

TEST(SinkPlugin, Null) {
  Plugin lib("null");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_EQ(lib.get()->abi_version, kAbiVersion);
  EXPECT_STREQ(lib.get()->name, "null");
  {
    auto sink = lib.get()->create({});
    Message m;
    m.payload = "{}";
    std::vector<Outcome> outcomes(1);
    sink->send({m}, outcomes, 1s);
    EXPECT_EQ(outcomes[0].delivery, Delivery::kAcked);
  }
  EXPECT_THROW(lib.get()->create({{"fail_every", "0"}}), ConfigError);
  ASSERT_EQ(lib.get()->option_count, 6u);
  EXPECT_STREQ(lib.get()->options[0].name, "fail_every");
  EXPECT_STREQ(lib.get()->options[2].name, "delay_ms");
}

TEST(SinkPlugin, Kafka) {
  Plugin lib("kafka");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_EQ(lib.get()->abi_version, kAbiVersion);
  EXPECT_STREQ(lib.get()->name, "kafka");
  try {
    lib.get()->create({{"topic.template", "x"}});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bootstrap.servers is required"), std::string::npos);
  }
  EXPECT_THROW(lib.get()->create({{"bootstrap.servers", "127.0.0.1:1"}, {"no.such.thing", "1"}}),
               ConfigError);
  // The plugin refuses what its declaration leaves out, whoever loads it.
  EXPECT_GT(lib.get()->option_count, 50u);
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

// Only refused options: a created NATS sink would leave cnats callbacks into the library,
// which the Plugin closes at the end of the test.
TEST(SinkPlugin, Nats) {
  Plugin lib("nats");
  ASSERT_NE(lib.get(), nullptr) << lib.error();
  EXPECT_EQ(lib.get()->abi_version, kAbiVersion);
  EXPECT_STREQ(lib.get()->name, "nats");
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
  EXPECT_EQ(lib.get()->option_count, 11u);
}

}  // namespace
