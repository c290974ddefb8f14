// The Kafka sink's allowlist (kafka_options.hpp): what a role given configure_sink may set,
// one test per class of refused property, and that secrets stay out of everything the sink
// hands out, librdkafka's debug output included.
#include "sinks/kafka/kafka_options.hpp"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sinks/kafka/kafka_sink.hpp"
#include "sinks/common/option_rules.hpp"
#include "test_support.hpp"

namespace {

using namespace outbox::sinks;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using outbox::test::kLongDeadline;

const OptionTable kTable{kKafkaOptions, kKafkaOptionCount};
const Options kBootstrap = {{"bootstrap.servers", "127.0.0.1:1"}, {"log_level", "2"}};

// What configure_sink says about one option (with a working bootstrap.servers), and what the
// sink itself says when it is given the option anyway.
std::string loader_refusal(const std::string& name, const std::string& value) {
  Options given = kBootstrap;
  given.emplace_back(name, value);
  try {
    resolve_options("kafka", kTable, given, "");
  } catch (const OptionError& e) {
    return e.what();
  }
  return "";
}
std::string sink_refusal(const std::string& name, const std::string& value) {
  Options given = kBootstrap;
  given.emplace_back(name, value);
  try {
    KafkaSink sink(given);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::vector<std::pair<std::string, std::string>>& options) {
  for (const auto& [name, value] : options) {
    const std::string expected = "sink \"kafka\" has no option \"" + name + "\"";
    EXPECT_EQ(loader_refusal(name, value), expected);
    EXPECT_EQ(sink_refusal(name, value), expected);  // defence in depth
    EXPECT_EQ(kTable.find(name), nullptr) << name;
  }
}

TEST(KafkaOptions, RefusesWhatRunsACommand) {
  expect_refused({{"sasl.kerberos.kinit.cmd", "touch /tmp/outbox-pwned"},
                  // Only kinit's: without kinit it does nothing, so it is not offered.
                  {"sasl.kerberos.keytab", "/etc/krb5.keytab"},
                  // Forced to 0: librdkafka never runs kinit.
                  {"sasl.kerberos.min.time.before.relogin", "60000"}});
}

TEST(KafkaOptions, RefusesWhatLoadsCode) {
  expect_refused({{"plugin.library.paths", "/tmp/evil.so"},
                  {"ssl.engine.location", "/tmp/evil.so"},
                  {"ssl.engine.id", "dynamic"},
                  {"ssl.providers", "legacy"},
                  {"interceptors", "x"}});
}

TEST(KafkaOptions, RefusesCallbacksAndProcessWideSettings) {
  expect_refused({{"dr_msg_cb", "0"},
                  {"dr_cb", "0"},
                  {"error_cb", "0"},
                  {"log_cb", "0"},
                  {"stats_cb", "0"},
                  {"socket_cb", "0"},
                  {"connect_cb", "0"},
                  {"open_cb", "0"},
                  {"resolve_cb", "0"},
                  {"opaque", "0"},
                  {"default_topic_conf", "0"},
                  {"oauthbearer_token_refresh_cb", "0"},
                  {"ssl.certificate.verify_cb", "0"},
                  {"ssl_engine_callback_data", "0"},
                  {"partitioner_cb", "0"},
                  {"background_event_cb", "0"},
                  // A signal handler in the server's process; srand() of the process.
                  {"internal.termination.signal", "10"},
                  {"enable.random.seed", "false"}});
}

TEST(KafkaOptions, RefusesWhatBreaksTheSink) {
  expect_refused({{"delivery.report.only.error", "true"},  // no ack would ever arrive
                  {"log.queue", "true"},                   // log lines would stay queued
                  {"enabled_events", "1"},
                  {"statistics.interval.ms", "1000"},
                  {"queuing.strategy", "lifo"},
                  {"transactional.id", "outbox"},
                  {"transaction.timeout.ms", "60000"}});
}

TEST(KafkaOptions, RefusesConsumerTestAndHiddenProperties) {
  expect_refused({{"group.id", "g"},
                  {"enable.auto.commit", "false"},
                  {"auto.offset.reset", "earliest"},
                  {"fetch.max.bytes", "1"},
                  {"isolation.level", "read_committed"},
                  {"offset.store.path", "/tmp"},
                  {"test.mock.num.brokers", "3"},
                  {"test.mock.broker.rtt", "10"},
                  {"ut_handle_ProduceResponse", "0"},
                  {"client.software.name", "x"},
                  {"enable.sparse.connections", "false"},
                  {"ssl.truststore.location", "x"},
                  {"sasl.jaas.config", "x"}});
}

TEST(KafkaOptions, KindsOfFilesAndSecrets) {
  for (const char* name : {"ssl.ca.location", "ssl.certificate.location", "ssl.crl.location"}) {
    ASSERT_NE(kTable.find(name), nullptr) << name;
    EXPECT_EQ(kTable.find(name)->kind, OptionKind::kFile) << name;
  }
  // Key material: files that others must not read.
  for (const char* name : {"ssl.key.location", "ssl.keystore.location"}) {
    ASSERT_NE(kTable.find(name), nullptr) << name;
    EXPECT_EQ(kTable.find(name)->kind, OptionKind::kPrivateFile) << name;
  }
  for (const char* name :
       {"sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
        "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config"}) {
    ASSERT_NE(kTable.find(name), nullptr) << name;
    EXPECT_EQ(kTable.find(name)->kind, OptionKind::kSecret) << name;
  }
  // Declared once each, with a description.
  for (std::size_t i = 0; i < kKafkaOptionCount; ++i) {
    EXPECT_EQ(kTable.find(kKafkaOptions[i].name), &kKafkaOptions[i]) << kKafkaOptions[i].name;
    EXPECT_NE(std::string(kKafkaOptions[i].description), "") << kKafkaOptions[i].name;
  }
  // Every declared property is one librdkafka documents (a typo would refuse a good option).
  char* listing = nullptr;
  size_t listing_size = 0;
  FILE* out = open_memstream(&listing, &listing_size);
  ASSERT_NE(out, nullptr);
  rd_kafka_conf_properties_show(out);
  fclose(out);
  const std::string properties = std::string("\n") + listing;
  free(listing);
  for (std::size_t i = 0; i < kKafkaOptionCount; ++i) {
    const std::string name = kKafkaOptions[i].name;
    if (name == "topic.template" || name == "timestamp" || name == "straggler.timeout.ms" ||
        name.rfind("cloudevents", 0) == 0) {
      continue;  // the sink's own
    }
    EXPECT_NE(properties.find("\n" + name + " "), std::string::npos) << name;
  }
}

TEST(KafkaOptions, ForcedAndCheckedValues) {
  EXPECT_NE(sink_refusal("enable.idempotence", "false").find("must stay true"), std::string::npos);
  EXPECT_NE(sink_refusal("acks", "1").find("must stay \"all\""), std::string::npos);
  EXPECT_EQ(sink_refusal("acks", "all"), "");
  EXPECT_EQ(sink_refusal("sasl.oauthbearer.token.endpoint.url", "file:///etc/passwd"),
            "kafka sink: sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL");
  EXPECT_EQ(sink_refusal("sasl.mechanisms", "GSSAPI"), "");
}

// librdkafka 2.0.2 crashes (SIGSEGV in rdk:main) on OAUTHBEARER with the unsecured JWT and a
// malformed sasl.oauthbearer.config: refused before librdkafka sees any of it.
TEST(KafkaOptions, RefusesTheUnsecuredJwt) {
  const std::string refused =
      "kafka sink: enable.sasl.oauthbearer.unsecure.jwt is refused: the unsecured JWT handler "
      "is a development feature";
  const Options crashing = {{"bootstrap.servers", "127.0.0.1:1"},
                            {"security.protocol", "sasl_plaintext"},
                            {"sasl.mechanism", "OAUTHBEARER"},
                            {"enable.sasl.oauthbearer.unsecure.jwt", "true"},
                            {"sasl.oauthbearer.config", "bogus-config = = ="}};
  for (const Options& options :
       {crashing, Options{{"bootstrap.servers", "127.0.0.1:1"},
                          {"enable.sasl.oauthbearer.unsecure.jwt", "true"}}}) {
    try {
      kafka_settings(options);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(refused, 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find("bogus-config"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(sink_refusal("enable.sasl.oauthbearer.unsecure.jwt", "true").rfind(refused, 0), 0u);
  EXPECT_EQ(sink_refusal("enable.sasl.oauthbearer.unsecure.jwt", "false"), "");
  // Not a boolean as configure_sink takes it ("1", "yes"): refused before, by the kind.
  EXPECT_EQ(loader_refusal("enable.sasl.oauthbearer.unsecure.jwt", "1"),
            "sink \"kafka\": option \"enable.sasl.oauthbearer.unsecure.jwt\" must be true or "
            "false (\"1\")");
  EXPECT_NE(sink_refusal("enable.sasl.oauthbearer.unsecure.jwt", "yes"), "");
}

TEST(KafkaOptions, MaxMessageBytes) {
  KafkaSink plain(kBootstrap);
  EXPECT_EQ(plain.max_message_bytes(), 1000000u);
  Options options = kBootstrap;
  options.emplace_back("message.max.bytes", "2000000");
  KafkaSink raised(options);
  EXPECT_EQ(raised.max_message_bytes(), 2000000u);
}

TEST(KafkaOptions, Redacted) {
  EXPECT_EQ(redacted("a pw b pwpw", {"pw"}), "a [redacted] b [redacted][redacted]");
  EXPECT_EQ(redacted("none here", {"", "x1"}), "none here");
  EXPECT_EQ(redacted("k=[redacted]", {"[redacted]"}), "k=[redacted]");  // terminates
}

// GSSAPI without kinit: librdkafka's default kinit command substitutes the principal into a
// shell command line, which would run as the server's user. The sink never lets it run.
TEST(KafkaOptions, KerberosNeverRunsAShellCommand) {
  char dir[] = "/tmp/outbox-kinit-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string marker = std::string(dir) + "/ran";
  const std::string principal = "x 2>/dev/null; touch '" + marker + "' #";
  {
    Options options = kBootstrap;
    options.insert(options.end(), {{"security.protocol", "sasl_plaintext"},
                                   {"sasl.mechanisms", "GSSAPI"},
                                   {"sasl.kerberos.principal", principal}});
    KafkaSink sink(options);
    std::this_thread::sleep_for(1500ms);
  }
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the sink ran kinit through the shell";

  // The control: librdkafka left to its defaults runs it. (If this starts failing, librdkafka
  // changed; the sink's own setting stays.)
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (auto [name, value] :
       {std::pair<std::string, std::string>{"bootstrap.servers", "127.0.0.1:1"},
        {"log_level", "0"},
        {"security.protocol", "sasl_plaintext"},
        {"sasl.mechanisms", "GSSAPI"},
        {"sasl.kerberos.keytab", "/nonexistent"},
        {"sasl.kerberos.principal", principal}}) {
    ASSERT_EQ(rd_kafka_conf_set(conf, name.c_str(), value.c_str(), errstr, sizeof errstr),
              RD_KAFKA_CONF_OK)
        << errstr;
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    GTEST_SKIP() << "no GSSAPI in this librdkafka: " << errstr;
  }
  for (auto until = Clock::now() + kLongDeadline;
       Clock::now() < until && access(marker.c_str(), F_OK) != 0;) {
    std::this_thread::sleep_for(50ms);
  }
  rd_kafka_destroy(rk);
  EXPECT_EQ(access(marker.c_str(), F_OK), 0) << "librdkafka's default ran no command here";
  unlink(marker.c_str());
  rmdir(dir);
}

// Every log line the relay would receive over `duration`, taken as often as it would.
std::string all_log(Sink& sink, std::chrono::milliseconds duration) {
  std::string all;
  for (auto until = Clock::now() + duration; Clock::now() < until;) {
    for (const LogLine& line : sink.take_log()) all += line.text + "\n";
    std::this_thread::sleep_for(20ms);
  }
  for (const LogLine& line : sink.take_log()) all += line.text + "\n";
  return all;
}

constexpr const char* kSecrets[] = {"S1-sasl-password", "S2-oidc-client-secret",
                                    "S3-key-passphrase", "S4-keystore-password",
                                    "S5-oauthbearer-config"};

::testing::AssertionResult no_secret_in(const std::string& text) {
  for (const char* secret : kSecrets) {
    if (text.find(secret) != std::string::npos) {
      return ::testing::AssertionFailure() << "secret " << secret << " in:\n" << text;
    }
  }
  return ::testing::AssertionSuccess();
}

// librdkafka's configuration dump (debug=conf) redacts only the properties it marks sensitive;
// in librdkafka 2.0 sasl.oauthbearer.client.secret is not one of them. The sink redacts every
// secret itself.
TEST(KafkaOptions, DebugOutputShowsNoSecret) {
  rd_kafka_t* mock_rk = nullptr;
  {
    char errstr[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof errstr);
    mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ASSERT_NE(mock_rk, nullptr) << errstr;
  }
  rd_kafka_mock_cluster_t* mock = rd_kafka_mock_cluster_new(mock_rk, 1);
  ASSERT_NE(mock, nullptr);
  const std::string bootstraps = rd_kafka_mock_cluster_bootstraps(mock);

  std::string seen;
  {  // SASL/PLAIN (the mock speaks no SASL: the handshake fails, with all debug contexts on)
    KafkaSink sink({{"bootstrap.servers", bootstraps},
                    {"debug", "all"},
                    {"security.protocol", "sasl_plaintext"},
                    {"sasl.mechanisms", "PLAIN"},
                    {"sasl.username", "relay"},
                    {"sasl.password", kSecrets[0]},
                    {"ssl.key.password", kSecrets[2]},
                    {"ssl.keystore.password", kSecrets[3]}});
    seen += all_log(sink, 0ms);
    std::vector<Message> messages(1);
    messages[0].aggregatetype = "order";
    messages[0].aggregateid = "k";
    messages[0].payload = "{}";
    std::vector<Outcome> outcomes(1);
    sink.send(messages, outcomes, 1500ms);
    seen += outcomes[0].error + "\n";
    seen += all_log(sink, 200ms);
    seen += sink.describe() + "\n";
  }
  // OAUTHBEARER with OIDC (the token endpoint refuses connections), the dump alone. Not in
  // every build: Debian's librdkafka 2.0 has no OIDC (no libcurl) and refuses the properties.
  try {
    KafkaSink sink({{"bootstrap.servers", bootstraps},
                    {"debug", "conf"},
                    {"security.protocol", "sasl_plaintext"},
                    {"sasl.mechanisms", "OAUTHBEARER"},
                    {"sasl.oauthbearer.method", "oidc"},
                    {"sasl.oauthbearer.client.id", "relay"},
                    {"sasl.oauthbearer.client.secret", kSecrets[1]},
                    {"sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"}});
    const std::string log = all_log(sink, 500ms);
    EXPECT_NE(log.find("sasl.oauthbearer.client.secret = [redacted]"), std::string::npos) << log;
    seen += log + sink.describe() + "\n";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported in this build"), std::string::npos)
        << e.what();
    seen += std::string(e.what()) + "\n";
  }
  {  // The default OAUTHBEARER method's configuration (unused without the unsecured JWT)
    KafkaSink sink({{"bootstrap.servers", bootstraps},
                    {"debug", "conf,security"},
                    {"security.protocol", "sasl_plaintext"},
                    {"sasl.mechanisms", "OAUTHBEARER"},
                    {"sasl.oauthbearer.config", std::string("principal=") + kSecrets[4]}});
    seen += all_log(sink, 500ms) + sink.describe() + "\n";
  }
  EXPECT_NE(seen.find("librdkafka CONF:"), std::string::npos) << "no configuration dump seen";
  EXPECT_TRUE(no_secret_in(seen));
  rd_kafka_mock_cluster_destroy(mock);
  rd_kafka_destroy(mock_rk);
}

// From configure_sink's options to the sink: secrets read from files, shown nowhere.
TEST(KafkaOptions, SecretFromAFileEndToEnd) {
  char dir[] = "/tmp/outbox-kafka-secrets-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/relay.password";
  std::ofstream(path) << kSecrets[0] << "\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);

  const Options resolved = resolve_options("kafka", kTable,
                                           {{"bootstrap.servers", "127.0.0.1:1"},
                                            {"log_level", "2"},
                                            {"security.protocol", "sasl_plaintext"},
                                            {"sasl.mechanisms", "SCRAM-SHA-512"},
                                            {"sasl.username", "relay"},
                                            {"sasl.password_file", "relay.password"}},
                                           dir);
  KafkaSink sink(resolved);
  EXPECT_EQ(sink.describe(),
            "kafka bootstrap.servers=127.0.0.1:1 topic.template=outbox.event.${aggregatetype} "
            "log_level=2 security.protocol=sasl_plaintext sasl.mechanisms=SCRAM-SHA-512");
  // A librdkafka refusal of a secret's value does not repeat it.
  try {
    KafkaSink bad({{"bootstrap.servers", "127.0.0.1:1"},
                   {"sasl.oauthbearer.method", std::string("oidc")},
                   {"sasl.oauthbearer.config", kSecrets[4]},
                   {"sasl.mechanisms", "OAUTHBEARER"},
                   {"security.protocol", "sasl_plaintext"}});
  } catch (const ConfigError& e) {
    EXPECT_TRUE(no_secret_in(e.what()));
  }
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
