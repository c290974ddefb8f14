#include "sinks/kafka/kafka_options.hpp"

#include <exception>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "sinks/common/option_rules.hpp"

namespace outbox::sinks {

namespace {
constexpr OptionKind kText = OptionKind::kText;
constexpr OptionKind kInteger = OptionKind::kInteger;
constexpr OptionKind kBoolean = OptionKind::kBoolean;
constexpr OptionKind kFile = OptionKind::kFile;
constexpr OptionKind kSecret = OptionKind::kSecret;
constexpr OptionKind kPrivateFile = OptionKind::kPrivateFile;
}  // namespace

// Keep docs/sink-options.md in step: a unit test fails when an option is missing there.
const OptionSpec kKafkaOptions[] = {
    // The sink's own.
    {"topic.template", kText,
     "topic per event: ${aggregatetype} (alias ${routedByValue}), ${type}"},
    {"timestamp", kText, "created_at (the event's time) or now (the time of sending)"},
    {"straggler.timeout.ms", kInteger,
     "once some of a batch are acknowledged, report the rest unavailable after this long "
     "without a report (ms; 0: wait for the batch's timeout)"},
    cloudevents::kEnabledOption,
    cloudevents::kSourceOption,
    // Brokers and connections.
    {"bootstrap.servers", kText, "initial brokers, host:port,... (required)"},
    {"metadata.broker.list", kText, "alias of bootstrap.servers"},
    {"client.id", kText, "client identifier the brokers see"},
    {"client.rack", kText, "rack of this client (broker.rack)"},
    {"security.protocol", kText, "plaintext, ssl, sasl_plaintext or sasl_ssl"},
    {"broker.address.family", kText, "any, v4 or v6"},
    {"broker.address.ttl", kInteger, "how long resolved broker addresses are cached (ms)"},
    {"socket.timeout.ms", kInteger, "timeout of network requests (ms)"},
    {"socket.send.buffer.bytes", kInteger, "socket send buffer (0: system default)"},
    {"socket.receive.buffer.bytes", kInteger, "socket receive buffer (0: system default)"},
    {"socket.keepalive.enable", kBoolean, "TCP keep-alives on broker sockets"},
    {"socket.nagle.disable", kBoolean, "TCP_NODELAY on broker sockets"},
    {"socket.max.fails", kInteger, "send failures before a broker connection is closed"},
    {"socket.connection.setup.timeout.ms", kInteger,
     "time to set a connection up, TLS/SASL included (ms)"},
    {"connections.max.idle.ms", kInteger,
     "close idle broker connections after this (ms; 0: never)"},
    {"reconnect.backoff.ms", kInteger, "first wait before reconnecting to a broker (ms)"},
    {"reconnect.backoff.max.ms", kInteger, "longest wait before reconnecting to a broker (ms)"},
    {"api.version.request", kBoolean, "ask the brokers which protocol versions they support"},
    {"api.version.request.timeout.ms", kInteger, "timeout of that request (ms)"},
    {"api.version.fallback.ms", kInteger,
     "how long broker.version.fallback is used after it failed"},
    {"broker.version.fallback", kText, "broker version assumed when it cannot be asked"},
    {"max.in.flight.requests.per.connection", kInteger,
     "requests in flight per broker (at most 5 with idempotence)"},
    {"max.in.flight", kInteger, "alias of max.in.flight.requests.per.connection"},
    {"message.max.bytes", kInteger, "largest request, and so message, the producer sends (bytes)"},
    {"message.copy.max.bytes", kInteger, "messages up to this size are copied into the request"},
    {"receive.message.max.bytes", kInteger, "largest response accepted (bytes)"},
    // Metadata.
    {"topic.metadata.refresh.interval.ms", kInteger, "periodic metadata refresh (ms)"},
    {"metadata.max.age.ms", kInteger, "metadata cache lifetime (ms)"},
    {"topic.metadata.refresh.fast.interval.ms", kInteger,
     "refresh interval while a leader is missing (ms)"},
    {"topic.metadata.refresh.sparse", kBoolean, "ask only for the topics in use"},
    {"topic.metadata.propagation.max.ms", kInteger, "how long a new topic may take to appear (ms)"},
    {"topic.blacklist", kText, "regular expressions of topics to ignore in metadata"},
    {"allow.auto.create.topics", kBoolean,
     "let the brokers create missing topics (if they allow it)"},
    // librdkafka's log, into the server log through the relay.
    {"debug", kText, "debug contexts, comma-separated (generic, broker, topic, msg, ..., all)"},
    {"log_level", kInteger, "librdkafka's log level, 0-7 (syslog levels)"},
    {"log.thread.name", kBoolean, "name librdkafka's thread in its log lines"},
    {"log.connection.close", kBoolean, "log broker disconnects"},
    // The producer.
    {"enable.idempotence", kBoolean, "must stay true"},
    {"acks", kText, "must stay all (-1)"},
    {"request.required.acks", kText, "alias of acks: must stay all (-1)"},
    {"enable.gapless.guarantee", kBoolean, "a gap in the produced series is a fatal error"},
    {"queue.buffering.max.messages", kInteger, "most messages queued in the producer"},
    {"queue.buffering.max.kbytes", kInteger, "most kilobytes queued in the producer"},
    {"queue.buffering.max.ms", kText,
     "wait for more messages before sending a request (ms, a number)"},
    {"linger.ms", kText, "alias of queue.buffering.max.ms"},
    {"message.send.max.retries", kInteger, "retries of a failed request"},
    {"retries", kInteger, "alias of message.send.max.retries"},
    {"retry.backoff.ms", kInteger, "wait before a retry (ms)"},
    {"queue.buffering.backpressure.threshold", kInteger, "unsent requests that hold back new ones"},
    {"compression.codec", kText, "none, gzip, snappy, lz4 or zstd"},
    {"compression.type", kText, "alias of compression.codec"},
    {"compression.level", kInteger, "compression level (-1: the codec's default)"},
    {"batch.num.messages", kInteger, "most messages in one request's batch"},
    {"batch.size", kInteger, "most bytes in one request's batch"},
    {"sticky.partitioning.linger.ms", kInteger,
     "sticky partitioning of messages without a key (ms)"},
    {"request.timeout.ms", kInteger, "how long the broker may take to acknowledge (ms)"},
    {"message.timeout.ms", kInteger, "librdkafka's own delivery timeout (ms; 0: none)"},
    {"delivery.timeout.ms", kInteger, "alias of message.timeout.ms"},
    {"partitioner", kText, "partitioner (murmur2_random: the Java client's)"},
    // TLS.
    {"ssl.cipher.suites", kText, "TLS cipher suites (OpenSSL syntax)"},
    {"ssl.curves.list", kText, "TLS curves"},
    {"ssl.sigalgs.list", kText, "TLS signature algorithms"},
    {"ssl.ca.location", kFile,
     "CA certificates (PEM) that verify the brokers; unset: the system's"},
    {"ssl.ca.pem", kText, "CA certificate, PEM text"},
    {"ssl.crl.location", kFile, "certificate revocation list"},
    {"ssl.certificate.location", kFile, "client certificate (PEM)"},
    {"ssl.certificate.pem", kText, "client certificate, PEM text"},
    {"ssl.key.location", kPrivateFile, "client private key (PEM)"},
    {"ssl.key.password", kSecret, "passphrase of the client private key"},
    {"ssl.key.pem", kSecret, "client private key, PEM text"},
    {"ssl.keystore.location", kPrivateFile, "client keystore (PKCS#12)"},
    {"ssl.keystore.password", kSecret, "password of the client keystore"},
    {"enable.ssl.certificate.verification", kBoolean, "verify the brokers' certificates"},
    {"ssl.endpoint.identification.algorithm", kText,
     "https (check the broker's host name) or none"},
    // SASL.
    {"sasl.mechanisms", kText, "GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"},
    {"sasl.mechanism", kText, "alias of sasl.mechanisms"},
    {"sasl.username", kText, "user name for PLAIN and SCRAM"},
    {"sasl.password", kSecret, "password for PLAIN and SCRAM"},
    {"sasl.kerberos.service.name", kText, "Kerberos principal name the brokers run as"},
    {"sasl.kerberos.principal", kText, "this client's Kerberos principal"},
    {"sasl.oauthbearer.method", kText, "default or oidc"},
    {"sasl.oauthbearer.config", kSecret,
     "configuration of the unsecured JWT handler, which is refused: unused"},
    {"enable.sasl.oauthbearer.unsecure.jwt", kBoolean,
     "must stay false: the unsecured JWT handler is refused"},
    {"sasl.oauthbearer.client.id", kText, "OIDC client id"},
    {"sasl.oauthbearer.client.secret", kSecret, "OIDC client secret"},
    {"sasl.oauthbearer.scope", kText, "OIDC scope"},
    {"sasl.oauthbearer.extensions", kText, "OIDC extensions, key=value,..."},
    {"sasl.oauthbearer.token.endpoint.url", kText, "OIDC token endpoint (http:// or https://)"},
};
const std::size_t kKafkaOptionCount = std::size(kKafkaOptions);

namespace {

constexpr std::string_view kTopicTemplateOption = "topic.template";
constexpr std::string_view kTimestampOption = "timestamp";
constexpr std::string_view kStragglerOption = "straggler.timeout.ms";
constexpr std::string_view kTokenUrlOption = "sasl.oauthbearer.token.endpoint.url";
constexpr std::string_view kUnsecureJwtOption = "enable.sasl.oauthbearer.unsecure.jwt";

std::string conf_value(rd_kafka_conf_t* conf, const char* name) {
  char buf[512];
  size_t size = sizeof buf;
  if (rd_kafka_conf_get(conf, name, buf, &size) != RD_KAFKA_CONF_OK) return {};
  return buf;
}

// librdkafka's message may repeat the value: not shown for a secret or a sensitive name.
void set(rd_kafka_conf_t* conf, const std::string& name, const std::string& value,
         bool secret = false) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), errstr, sizeof errstr) !=
      RD_KAFKA_CONF_OK) {
    if (secret || looks_sensitive(name)) {
      throw ConfigError("kafka sink: option \"" + name + "\" was refused by librdkafka");
    }
    throw ConfigError("kafka sink: option \"" + name + "\": " + errstr);
  }
}

std::string shown(const std::string& value) {
  if (!value.empty() && value.find_first_of(" \t\"") == std::string::npos) return value;
  return "\"" + value + "\"";
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

using ShownOptions = std::vector<std::pair<std::string, std::string>>;

// Our defaults, set first, so that the user's options override them (and are checked after).
void set_defaults(rd_kafka_conf_t* conf) {
  set(conf, "enable.idempotence", "true");
  set(conf, "acks", "all");
  set(conf, "partitioner", "murmur2_random");
  set(conf, "client.id", "outbox-relay");
  // 1 ms lets each partition's messages of a batch go in one request: with 0, librdkafka
  // wakes its broker thread for nearly every message, and on a small machine its work
  // then crowds out the relay's. Nothing waits for it: finish() flushes.
  set(conf, "linger.ms", "1");
}

// The sink's own options (not librdkafka's): true if `name` is one, taken into `out`.
bool take_own_option(const std::string& name, const std::string& value, KafkaSettings& out,
                     std::string& topic_template, ShownOptions& shown_options) {
  if (name == kTopicTemplateOption) {
    topic_template = value;
    return true;
  }
  if (name == kTimestampOption) {
    if (value == "created_at") {
      out.timestamp_from_event = true;
    } else if (value == "now") {
      out.timestamp_from_event = false;
    } else {
      throw ConfigError("kafka sink: timestamp must be \"created_at\" or \"now\", not \"" + value +
                        "\"");
    }
    shown_options.emplace_back(name, value);
    return true;
  }
  if (name == kStragglerOption) {
    long long ms = -1;
    try {
      ms = std::stoll(value);
    } catch (const std::exception&) {
    }
    if (ms < 0 || ms > 3600000) {
      throw ConfigError("kafka sink: straggler.timeout.ms must be 0 to 3600000, not \"" + value +
                        "\"");
    }
    out.straggler_timeout = std::chrono::milliseconds(ms);
    shown_options.emplace_back(name, value);
    return true;
  }
  return false;
}

// librdkafka properties that are declared but refused with some values.
void check_value(const std::string& name, const std::string& value) {
  if (name == kUnsecureJwtOption && value != "false") {
    // A development feature, and librdkafka 2.0.2 crashes the server (SIGSEGV in its main
    // thread) when its sasl.oauthbearer.config is not valid.
    throw ConfigError(
        "kafka sink: enable.sasl.oauthbearer.unsecure.jwt is refused: the unsecured JWT "
        "handler is a development feature (unsigned tokens), and librdkafka 2.0 crashes the "
        "server when sasl.oauthbearer.config is not valid. Use sasl.oauthbearer.method=oidc "
        "(a librdkafka built with libcurl), SCRAM or TLS client certificates");
  }
  if (name == kTokenUrlOption && !starts_with(value, "https://") &&
      !starts_with(value, "http://")) {
    // librdkafka's HTTP client allows no other protocol either; this says so plainly.
    throw ConfigError(
        "kafka sink: sasl.oauthbearer.token.endpoint.url must be an http:// or "
        "https:// URL");
  }
}

// The user's options (cloudevents taken out): the sink's own into `out`, the rest set on
// librdkafka's configuration. Those that may be shown go into `shown_options`.
void apply_options(const OptionTable& table, const Options& rest, KafkaSettings& out,
                   ShownOptions& shown_options) {
  std::string topic_template(routing::kDefaultTopicTemplate);
  for (const auto& [name, value] : rest) {
    if (take_own_option(name, value, out, topic_template, shown_options)) continue;
    check_value(name, value);
    const bool secret = table.find(name)->kind == OptionKind::kSecret;
    set(out.conf.get(), name, value, secret);
    if (!secret && !looks_sensitive(name) && name != "bootstrap.servers" &&
        name != "metadata.broker.list") {
      shown_options.emplace_back(name, value);
    }
  }
  out.topic_template = routing::TopicTemplate(topic_template);
}

// What the sink forces, checked once the user's options are set; returns bootstrap.servers.
std::string check_forced(rd_kafka_conf_t* conf) {
  // Never kinit: librdkafka runs sasl.kerberos.kinit.cmd through the shell (its default
  // substitutes sasl.kerberos.principal into the command line) unless this is 0. GSSAPI then
  // uses the tickets the server's environment provides (KRB5CCNAME, KRB5_CLIENT_KTNAME).
  set(conf, "sasl.kerberos.min.time.before.relogin", "0");
  set(conf, "sasl.kerberos.kinit.cmd", "");

  if (conf_value(conf, "enable.idempotence") != "true") {
    throw ConfigError(
        "kafka sink: enable.idempotence must stay true (it keeps the order of a key across "
        "retries and avoids duplicates from retries)");
  }
  const std::string acks = conf_value(conf, "acks");
  if (acks != "-1" && acks != "all") {
    throw ConfigError("kafka sink: acks must stay \"all\" (-1), not \"" + acks +
                      "\": an event is marked published only once every in-sync replica "
                      "has it");
  }
  std::string bootstrap = conf_value(conf, "bootstrap.servers");
  if (bootstrap.empty()) throw ConfigError("kafka sink: bootstrap.servers is required");
  return bootstrap;
}

// describe()'s text: no secret and no sensitive-looking value.
std::string description(const KafkaSettings& out, const std::string& bootstrap,
                        const ShownOptions& shown_options) {
  std::string text = "kafka bootstrap.servers=" + shown(bootstrap);
  text += " topic.template=" + shown(out.topic_template.text());
  for (const auto& [name, value] : shown_options) text += " " + name + "=" + shown(value);
  if (out.cloudevents.enabled) text += " cloudevents.source=" + shown(out.cloudevents.source);
  return text;
}

}  // namespace

KafkaSettings kafka_settings(const Options& options) {
  const OptionTable table{kKafkaOptions, kKafkaOptionCount};
  // Before any rd_kafka_conf_set: some properties act when set (plugin.library.paths loads
  // its libraries at once).
  check_declared("kafka", table, options);

  KafkaSettings out;
  out.conf.reset(rd_kafka_conf_new());
  rd_kafka_conf_t* conf = out.conf.get();
  set_defaults(conf);
  ShownOptions shown_options;
  Options rest = options;
  out.cloudevents = cloudevents::take_settings(rest);
  apply_options(table, rest, out, shown_options);
  out.secrets = secret_values(table, options);

  const std::string bootstrap = check_forced(conf);
  out.max_message_bytes = std::stoul(conf_value(conf, "message.max.bytes"));
  out.partitioner = conf_value(conf, "partitioner");
  out.description = description(out, bootstrap, shown_options);
  return out;
}

}  // namespace outbox::sinks
