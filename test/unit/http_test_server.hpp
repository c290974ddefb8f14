// A tiny HTTP/1.1 server on 127.0.0.1 for the HTTP sink's tests: keep-alive, Content-Length
// bodies, one thread per connection. Records every request in arrival order and counts the
// connections it accepted; a handler chooses each reply.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace outbox::test {

struct Received {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  int connection = 0;  // which accepted connection carried it (1, 2, ...)
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct Reply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds delay{0};
};

class TestServer {
 public:
  using Handler = std::function<Reply(const Received&)>;

  explicit TestServer(Handler handler = [](const Received&) { return Reply{}; })
      : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 64) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("test server: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~TestServer() {
    stop_ = true;
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
    close(listen_fd_);
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Received> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int connections() const { return accepted_; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      const int number = ++accepted_;
      connections_.emplace_back([this, fd, number] { serve(fd, number); });
    }
  }

  // Reads until `buffer` holds `n` bytes; false when the peer closed or the server stops.
  bool fill(int fd, std::string& buffer, std::size_t n) {
    char chunk[16384];
    while (buffer.size() < n) {
      pollfd p{fd, POLLIN, 0};
      if (stop_) return false;
      if (poll(&p, 1, 20) <= 0) continue;
      const ssize_t got = read(fd, chunk, sizeof chunk);
      if (got <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(got));
    }
    return true;
  }

  void serve(int fd, int number) {
    std::string buffer;
    while (!stop_) {
      std::size_t end;
      while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
        if (!fill(fd, buffer, buffer.size() + 1)) {
          close(fd);
          return;
        }
      }
      Received r;
      r.connection = number;
      std::size_t line_end = buffer.find("\r\n");
      const std::string first = buffer.substr(0, line_end);
      r.method = first.substr(0, first.find(' '));
      r.target = first.substr(first.find(' ') + 1);
      r.target = r.target.substr(0, r.target.find(' '));
      for (std::size_t at = line_end + 2; at < end;) {
        const std::size_t eol = buffer.find("\r\n", at);
        const std::string line = buffer.substr(at, eol - at);
        const std::size_t colon = line.find(':');
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        r.headers[name] = value;
        at = eol + 2;
      }
      const std::size_t length =
          r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
      if (!fill(fd, buffer, end + 4 + length)) break;
      r.body = buffer.substr(end + 4, length);
      buffer.erase(0, end + 4 + length);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(r);
      }
      const Reply reply = handler_(r);
      if (reply.delay.count() > 0) std::this_thread::sleep_for(reply.delay);
      std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\n";
      for (const auto& [name, value] : reply.headers) out += name + ": " + value + "\r\n";
      out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
      if (write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) break;
    }
    close(fd);
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // touched by the acceptor only, until it is joined
  mutable std::mutex mu_;
  std::vector<Received> requests_;
};

}  // namespace outbox::test
