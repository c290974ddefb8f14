// outbox_kafka_mock: a Kafka cluster for end-to-end tests, without Kafka. It runs
// librdkafka's built-in mock cluster (rdkafka_mock.h), which speaks the real protocol on
// 127.0.0.1, so any client (the kafka sink, kcat) can use it.
//
//   outbox_kafka_mock [BROKERS]          BROKERS: 1..16, default 3
//
// Prints the bootstrap servers ("127.0.0.1:PORT,127.0.0.1:PORT,...") as the first line of
// stdout, then reads one command per line on stdin and answers each with one line, "ok" or
// "error <why>":
//   down <broker_id>                     disconnect the broker, refuse new connections
//                                        (-1: all brokers; no leader change)
//   up <broker_id>                       accept connections again (-1: all)
//   errors <api> <count> <error_code>    the next <count> requests of <api> fail with
//                                        <error_code>; <api> is a name (Produce, Metadata,
//                                        InitProducerId, ...) or a number (Produce=0), the
//                                        code a number (e.g. 19) or a librdkafka name
//                                        (NOT_ENOUGH_REPLICAS, _TRANSPORT)
//   clear_errors <api>                   forget the errors still queued for <api>
//   rtt <broker_id> <ms>                 delay every answer of the broker (-1: all)
//   create_topic <name> <partitions>     replication factor min(3, BROKERS)
//   leader <topic> <partition> <broker_id>
//                                        make the broker the partition's leader (-1: none,
//                                        so producers wait for a leader or fail fast)
//   quit                                 stop (so does end of input)
// Topics are created automatically on first use with 4 partitions (the mock's default).
// Broker ids are 1..BROKERS. Lines starting with '#' and empty lines are ignored, unanswered.
//
// Unlike librdkafka's mock on its own, the brokers set TCP_NODELAY on the connections they
// accept, as Kafka's brokers do (see accept() below). At exit, a line on stderr says on how
// many connections it was set. OUTBOX_KAFKA_MOCK_NAGLE=1 in the environment leaves it unset
// (librdkafka's own behaviour, to compare).
#include <dlfcn.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::atomic<bool> nodelay{true};               // false: OUTBOX_KAFKA_MOCK_NAGLE=1
std::atomic<unsigned long> nodelay_set{0};     // accepted connections with TCP_NODELAY
std::atomic<unsigned long> nodelay_failed{0};  // ... where setsockopt failed

// A broker answers each request as soon as it has it: without TCP_NODELAY, an answer
// written while an earlier one is still unacknowledged waits (Nagle) for the client's
// delayed ACK, ~40 ms on Linux. librdkafka's producer keeps one ProduceRequest per partition
// in flight, so a batch spanning several partitions took ~40 ms against the bare mock.
// Kafka's broker sets TCP_NODELAY on every socket it accepts (kafka.network.SocketServer,
// Acceptor: socketChannel.socket().setTcpNoDelay(true)).
int with_nodelay(int fd) {
  if (fd < 0 || !nodelay.load(std::memory_order_relaxed)) return fd;
  const int on = 1;
  const int saved_errno = errno;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0) {
    nodelay_set.fetch_add(1, std::memory_order_relaxed);
  } else {
    nodelay_failed.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
  return fd;
}

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

// librdkafka's mock broker accepts connections with accept() (rdkafka_mock.c,
// rd_kafka_mock_broker_listen_io) and sets no socket option on them. The dynamic linker
// looks for librdkafka's accept in the executable first, so these definitions take the
// place of libc's: they call libc's, then set TCP_NODELAY. (accept4 too, in case a
// librdkafka version uses it.)
extern "C" int accept(int fd, struct sockaddr* addr, socklen_t* addr_len) {
  using Accept = int (*)(int, struct sockaddr*, socklen_t*);
  static const Accept libc_accept = next_symbol<Accept>("accept");
  if (libc_accept == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return with_nodelay(libc_accept(fd, addr, addr_len));
}

extern "C" int accept4(int fd, struct sockaddr* addr, socklen_t* addr_len, int flags) {
  using Accept4 = int (*)(int, struct sockaddr*, socklen_t*, int);
  static const Accept4 libc_accept4 = next_symbol<Accept4>("accept4");
  if (libc_accept4 == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return with_nodelay(libc_accept4(fd, addr, addr_len, flags));
}

namespace {

struct ApiKey {
  const char* name;
  int key;
};

// Kafka protocol request types (the ones a producer, a consumer or kcat send).
constexpr ApiKey kApiKeys[] = {
    {"Produce", 0},
    {"Fetch", 1},
    {"ListOffsets", 2},
    {"Metadata", 3},
    {"OffsetCommit", 8},
    {"OffsetFetch", 9},
    {"FindCoordinator", 10},
    {"JoinGroup", 11},
    {"Heartbeat", 12},
    {"LeaveGroup", 13},
    {"SyncGroup", 14},
    {"DescribeGroups", 15},
    {"ListGroups", 16},
    {"SaslHandshake", 17},
    {"ApiVersions", 18},
    {"CreateTopics", 19},
    {"DeleteTopics", 20},
    {"InitProducerId", 22},
    {"AddPartitionsToTxn", 24},
    {"AddOffsetsToTxn", 25},
    {"EndTxn", 26},
    {"TxnOffsetCommit", 28},
    {"SaslAuthenticate", 36},
};

bool equal_nocase(const std::string& a, const char* b) {
  if (a.size() != std::strlen(b)) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

bool parse_int(const std::string& text, long min, long max, long& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  out = v;
  return true;
}

// "Produce", "produce", "0", "Produce=0".
bool parse_api(const std::string& text, int& out) {
  std::string name = text;
  std::string number;
  if (auto eq = text.find('='); eq != std::string::npos) {
    name = text.substr(0, eq);
    number = text.substr(eq + 1);
  }
  long v;
  if (number.empty() && parse_int(name, 0, 32767, v)) {
    out = static_cast<int>(v);
    return true;
  }
  for (const ApiKey& api : kApiKeys) {
    if (equal_nocase(name, api.name)) {
      if (!number.empty() && (!parse_int(number, 0, 32767, v) || v != api.key)) return false;
      out = api.key;
      return true;
    }
  }
  return false;
}

// A number, or a librdkafka error name with or without RD_KAFKA_RESP_ERR_.
bool parse_error(const std::string& text, rd_kafka_resp_err_t& out) {
  long v;
  if (parse_int(text, -32768, 32767, v)) {
    out = static_cast<rd_kafka_resp_err_t>(v);
    return true;
  }
  std::string name = text;
  if (name.rfind("RD_KAFKA_RESP_ERR_", 0) == 0) name = name.substr(18);
  const rd_kafka_err_desc* descs = nullptr;
  size_t count = 0;
  rd_kafka_get_err_descs(&descs, &count);
  for (size_t i = 0; i < count; ++i) {
    if (descs[i].name != nullptr && equal_nocase(name, descs[i].name)) {
      out = descs[i].code;
      return true;
    }
  }
  return false;
}

std::string run(rd_kafka_mock_cluster_t* mcluster, int brokers, const std::string& line,
                bool& quit) {
  std::istringstream in(line);
  std::vector<std::string> args;
  for (std::string word; in >> word;) args.push_back(word);
  const std::string& cmd = args[0];
  long id;
  auto result = [](rd_kafka_resp_err_t err) -> std::string {
    return err == RD_KAFKA_RESP_ERR_NO_ERROR ? "ok" : std::string("error ") + rd_kafka_err2str(err);
  };

  if (cmd == "quit" || cmd == "exit") {
    quit = true;
    return "ok";
  }
  if (cmd == "down" || cmd == "up") {
    if (args.size() != 2 || !parse_int(args[1], -1, brokers, id) || id == 0) {
      return "error usage: " + cmd + " <broker_id 1.." + std::to_string(brokers) + " or -1>";
    }
    auto id32 = static_cast<int32_t>(id);
    return result(cmd == "down" ? rd_kafka_mock_broker_set_down(mcluster, id32)
                                : rd_kafka_mock_broker_set_up(mcluster, id32));
  }
  if (cmd == "rtt") {
    long ms;
    if (args.size() != 3 || !parse_int(args[1], -1, brokers, id) || id == 0 ||
        !parse_int(args[2], 0, 3600000, ms)) {
      return "error usage: rtt <broker_id or -1> <ms>";
    }
    return result(
        rd_kafka_mock_broker_set_rtt(mcluster, static_cast<int32_t>(id), static_cast<int>(ms)));
  }
  if (cmd == "errors") {
    int api;
    long count;
    rd_kafka_resp_err_t err;
    if (args.size() != 4 || !parse_api(args[1], api) || !parse_int(args[2], 1, 100000, count) ||
        !parse_error(args[3], err)) {
      return "error usage: errors <api name or number> <count 1..100000> <error code or name>";
    }
    std::vector<rd_kafka_resp_err_t> errs(static_cast<std::size_t>(count), err);
    rd_kafka_mock_push_request_errors_array(mcluster, static_cast<int16_t>(api), errs.size(),
                                            errs.data());
    return "ok";
  }
  if (cmd == "clear_errors") {
    int api;
    if (args.size() != 2 || !parse_api(args[1], api)) {
      return "error usage: clear_errors <api name or number>";
    }
    rd_kafka_mock_clear_request_errors(mcluster, static_cast<int16_t>(api));
    return "ok";
  }
  if (cmd == "create_topic") {
    long partitions;
    if (args.size() != 3 || !parse_int(args[2], 1, 10000, partitions)) {
      return "error usage: create_topic <name> <partitions>";
    }
    return result(rd_kafka_mock_topic_create(
        mcluster, args[1].c_str(), static_cast<int>(partitions), brokers < 3 ? brokers : 3));
  }
  if (cmd == "leader") {
    long partition;
    if (args.size() != 4 || !parse_int(args[2], 0, 9999, partition) ||
        !parse_int(args[3], -1, brokers, id) || id == 0) {
      return "error usage: leader <topic> <partition> <broker_id 1.." + std::to_string(brokers) +
             " or -1>";
    }
    return result(rd_kafka_mock_partition_set_leader(
        mcluster, args[1].c_str(), static_cast<int32_t>(partition), static_cast<int32_t>(id)));
  }
  return "error unknown command \"" + cmd +
         "\" (down, up, errors, clear_errors, rtt, create_topic, leader, quit)";
}

}  // namespace

int main(int argc, char** argv) {
  long brokers = 3;
  if (argc > 2 || (argc == 2 && !parse_int(argv[1], 1, 16, brokers))) {
    std::cerr << "usage: " << argv[0] << " [BROKERS 1..16, default 3]\n";
    return 2;
  }

  const char* nagle = std::getenv("OUTBOX_KAFKA_MOCK_NAGLE");
  nodelay = nagle == nullptr || *nagle == '\0' || std::strcmp(nagle, "0") == 0;

  // The mock cluster needs a client instance for its bookkeeping; it never connects.
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
    std::cerr << "outbox_kafka_mock: " << errstr << "\n";
    return 1;
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    std::cerr << "outbox_kafka_mock: " << errstr << "\n";
    return 1;
  }
  rd_kafka_mock_cluster_t* mcluster = rd_kafka_mock_cluster_new(rk, static_cast<int>(brokers));
  if (mcluster == nullptr) {
    rd_kafka_destroy(rk);
    std::cerr << "outbox_kafka_mock: could not create the mock cluster\n";
    return 1;
  }

  std::cout << rd_kafka_mock_cluster_bootstraps(mcluster) << std::endl;  // endl flushes

  bool quit = false;
  for (std::string line; !quit && std::getline(std::cin, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::cout << run(mcluster, static_cast<int>(brokers), line, quit) << std::endl;
  }

  rd_kafka_mock_cluster_destroy(mcluster);
  rd_kafka_destroy(rk);
  if (nodelay) {
    std::cerr << "outbox_kafka_mock: TCP_NODELAY set on " << nodelay_set.load() << " of "
              << nodelay_set.load() + nodelay_failed.load() << " accepted connections\n";
  } else {
    std::cerr << "outbox_kafka_mock: TCP_NODELAY not set (OUTBOX_KAFKA_MOCK_NAGLE)\n";
  }
  return 0;
}
