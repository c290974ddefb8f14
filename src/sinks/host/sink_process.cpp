#include "sinks/host/sink_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace outbox::sinks {
namespace {

constexpr int kSocketFd = 3;

// Between fork and exec only async-signal-safe calls: the parent may be multi-threaded (a unit
// test; a relay is not), so the child must not take a lock another thread held at fork time.
[[noreturn]] void exec_child(pid_t parent, const char* program, char* const argv[], int socket,
                             int max_fd) {
  // Dies with the relay. The relay may have died already, before the prctl: then exit.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
  if (socket == kSocketFd) {
    if (fcntl(kSocketFd, F_SETFD, 0) != 0) _exit(126);
  } else if (dup2(socket, kSocketFd) != kSocketFd) {
    _exit(126);
  }
  const int null = open("/dev/null", O_RDWR);
  if (null < 0) _exit(126);
  for (int fd = 0; fd <= 2; ++fd) {
    if (fd != null && dup2(null, fd) != fd) _exit(126);
  }
#ifdef SYS_close_range
  if (syscall(SYS_close_range, kSocketFd + 1, ~0U, 0) != 0)
#endif
  {
    for (int fd = kSocketFd + 1; fd < max_fd; ++fd) close(fd);
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  sigemptyset(&action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    const bool ignored = sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGUSR1 ||
                         sig == SIGUSR2 || sig == SIGPIPE;
    action.sa_handler = ignored ? SIG_IGN : SIG_DFL;
    sigaction(sig, &action, nullptr);  // fails for SIGKILL, SIGSTOP and the reserved ones
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(program, argv);
  _exit(127);
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return "died (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited (status " + std::to_string(WEXITSTATUS(status)) + ")";
  return "ended";
}

}  // namespace

pid_t spawn_sink_host(const std::string& program, int socket) {
  std::string arg0 = program;
  char* argv[] = {arg0.data(), nullptr};
  rlimit limit{};
  const int max_fd = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                         ? static_cast<int>(limit.rlim_cur)
                         : 65536;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("cannot start the sink process: fork: ") +
                             std::strerror(errno));
  }
  if (pid == 0) exec_child(parent, program.c_str(), argv, socket, max_fd);
  return pid;
}

std::string reap_sink_host(pid_t pid, std::chrono::milliseconds patience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return how_it_ended(status);
    if (r < 0 && errno != EINTR) return "ended";  // already reaped (SIGCHLD ignored)
    if (r == 0 && std::chrono::steady_clock::now() >= until) break;
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return "ended";
  }
  return how_it_ended(status);
}

}  // namespace outbox::sinks
