// Helpers of the NATS sink tests: a nats-server with JetStream on a free loopback port and a
// temporary store directory (started and stopped by the test), a cnats client that creates
// streams and reads every message of a stream back, and the Kafka tests' event helpers.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kafka_test_support.hpp"  // Events, summary(), send(), first_error()
#include "sinks/nats/nats_sink.hpp"

namespace outbox::sinks::test {

inline bool have_nats_server() {
  return std::system("command -v nats-server >/dev/null 2>&1") == 0;
}

inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// nats-server -js on 127.0.0.1; stop() (or kill_now()) and start() again keep the port and
// the store.
// set_jetstream(false) before start(): the next start has no JetStream (no one answers its
// API or a publish: "no responders"), and leaves the store alone.
class NatsServer {
 public:
  // extra: more nats-server arguments (--user/--pass, --auth, ...); `client_url` then carries
  // what the test's own client needs to connect.
  explicit NatsServer(std::vector<std::string> extra = {}, std::string client_url = "")
      : port_(free_port()), extra_(std::move(extra)), client_url_(std::move(client_url)) {
    char dir[] = "/tmp/outbox-nats-test-XXXXXX";
    if (mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = dir;
    start();
  }
  ~NatsServer() {
    stop();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      const std::string log = dir_ + "/server.log";
      std::vector<const char*> argv = {"nats-server", "-a", "127.0.0.1", "-p",
                                       port.c_str(),  "-l", log.c_str()};
      if (jetstream_) argv.insert(argv.end(), {"-js", "-sd", dir_.c_str()});
      for (const std::string& arg : extra_) argv.push_back(arg.c_str());
      argv.push_back(nullptr);
      execvp("nats-server", const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    // Ready once it accepts a connection.
    for (int i = 0; i < 200; ++i) {
      natsConnection* nc = nullptr;
      if (natsConnection_ConnectTo(&nc, client_url().c_str()) == NATS_OK) {
        natsConnection_Destroy(nc);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    throw std::runtime_error("nats-server did not start");
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // SIGSTOP: the server reads and answers nothing, its connections stay open.
  // Returns once every thread of the server has stopped: kill() only queues the signal, and a
  // thread running on the other core stops a moment later.
  void pause() {
    if (pid_ <= 0) return;
    kill(pid_, SIGSTOP);
    for (int i = 0; i < 400 && !stopped(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // SIGKILL (a paused server too): what it had not read is lost, its connections are reset.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void set_jetstream(bool on) { jetstream_ = on; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  std::string client_url() const {
    return client_url_.empty() ? url()
                               : "nats://" + client_url_ + "@127.0.0.1:" + std::to_string(port_);
  }

 private:
  // Every thread in state T (stopped), as /proc/<pid>/task/<tid>/stat says.
  bool stopped() const {
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (dir == nullptr) return false;
    bool all = true;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream stat(tasks + "/" + entry->d_name + "/stat");
      std::string line;
      std::getline(stat, line);
      const std::size_t end = line.rfind(") ");  // the state follows the command's ")"
      if (end != std::string::npos && end + 2 < line.size() && line[end + 2] != 'T') all = false;
    }
    closedir(dir);
    return all;
  }

  int port_;
  std::vector<std::string> extra_;
  std::string client_url_;
  std::string dir_;
  pid_t pid_ = -1;
  bool jetstream_ = true;
};

struct StoredMessage {
  uint64_t seq = 0;
  std::string subject;
  std::string data;
  std::map<std::string, std::string> headers;  // first value of each
};

// A plain cnats client of the test: streams and reading back.
class NatsClient {
 public:
  explicit NatsClient(const std::string& url) {
    if (natsConnection_ConnectTo(&nc_, url.c_str()) != NATS_OK ||
        natsConnection_JetStream(&js_, nc_, nullptr) != NATS_OK) {
      throw std::runtime_error("test client cannot connect to " + url);
    }
  }
  ~NatsClient() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(nc_);
  }
  NatsClient(const NatsClient&) = delete;
  NatsClient& operator=(const NatsClient&) = delete;

  jsCtx* js() const { return js_; }

  void add_stream(const std::string& name, const std::string& subject, int32_t max_msg_size = -1) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = name.c_str();
    const char* subjects[] = {subject.c_str()};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = 120LL * 1000 * 1000 * 1000;  // 2 min, in ns
    cfg.MaxMsgSize = max_msg_size;
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_AddStream(&si, js_, &cfg, nullptr, &code);
    jsStreamInfo_Destroy(si);
    if (s != NATS_OK) throw std::runtime_error("add stream " + name + ": " + natsStatus_GetText(s));
  }

  // Every message of the stream, in sequence order.
  std::vector<StoredMessage> read(const std::string& stream) {
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (js_GetStreamInfo(&si, js_, stream.c_str(), nullptr, &code) != NATS_OK) {
      throw std::runtime_error("no stream " + stream);
    }
    const uint64_t first = si->State.FirstSeq;
    const uint64_t last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    std::vector<StoredMessage> out;
    for (uint64_t seq = first; seq <= last && last > 0; ++seq) {
      natsMsg* msg = nullptr;
      if (js_GetMsg(&msg, js_, stream.c_str(), seq, nullptr, &code) != NATS_OK) continue;
      StoredMessage m;
      m.seq = seq;
      m.subject = natsMsg_GetSubject(msg);
      m.data.assign(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
      const char** keys = nullptr;
      int count = 0;
      if (natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK) {
        for (int k = 0; k < count; ++k) {
          const char* value = nullptr;
          if (natsMsgHeader_Get(msg, keys[k], &value) == NATS_OK) m.headers[keys[k]] = value;
        }
        free(static_cast<void*>(keys));
      }
      natsMsg_Destroy(msg);
      out.push_back(std::move(m));
    }
    return out;
  }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

// The stream every sink test publishes to: OUTBOX on outbox.event.>, made by a client that is
// gone again (the sink's connection is the only one left).
inline void add_outbox_stream(const NatsServer& server) {
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
}

// After a restart on the same store: JetStream answers "no responders" until it has loaded
// its streams, a moment after the server accepts connections. Waits until OUTBOX is back.
inline void wait_for_outbox_stream(const NatsServer& server) {
  NatsClient client(server.url());
  for (int i = 0; i < 200; ++i) {
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (js_GetStreamInfo(&si, client.js(), "OUTBOX", nullptr, &code) == NATS_OK) {
      jsStreamInfo_Destroy(si);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  throw std::runtime_error("the OUTBOX stream did not come back after the restart");
}

inline std::unique_ptr<NatsSink> make_nats_sink(const NatsServer& server, Options extra = {}) {
  Options options = {{"servers", server.url()}};
  for (auto& o : extra) options.push_back(std::move(o));
  return std::make_unique<NatsSink>(options);
}

inline std::string nats_config_error(Options options) {
  try {
    NatsSink sink(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

// A WaitObserver that counts its calls and the longest gap between two.
class CountingObserver : public WaitObserver {
 public:
  bool keep_waiting(std::string_view error) noexcept override {
    ++calls_;
    last_error_ = std::string(error);
    return true;
  }
  int calls_ = 0;
  std::string last_error_;
};

// Releases cnats' library-wide threads and memory at exit, for LeakSanitizer.
class NatsLibraryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { nats_CloseAndWait(5000); }
};

}  // namespace outbox::sinks::test
