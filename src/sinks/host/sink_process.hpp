// The life of a sink host process: started with fork + exec, so that it maps none of the
// caller's memory (no PostgreSQL shared memory) and runs none of its signal handlers; killed
// and reaped by its parent, never left a zombie.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace outbox::sinks {

// Starts `program` with `socket` (the child's end of a socketpair) as its file descriptor 3,
// /dev/null as 0, 1 and 2, every other descriptor closed (the caller's sockets and pipes, such
// as the postmaster-death pipe), every signal unblocked, and the signals PostgreSQL sends its
// processes ignored (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2): the child ends when its socket
// closes, and is killed (SIGKILL) when its parent dies. Returns the child's pid; throws
// std::runtime_error when it cannot fork. An exec that fails ends the child with status 127.
pid_t spawn_sink_host(const std::string& program, int socket);

// Waits up to `patience` for the process to end by itself, then kills it (SIGKILL); reaps it
// either way. Returns how it ended: "exited (status 0)", "died (signal 11)".
std::string reap_sink_host(pid_t pid, std::chrono::milliseconds patience);

}  // namespace outbox::sinks
