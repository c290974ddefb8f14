// Every signal blocked while it lives, on the calling thread: threads a client library starts
// meanwhile (curl's resolver, cnats' reconnect thread) inherit the mask, so PostgreSQL's
// signal handlers never run on them. Signals that arrive meanwhile stay pending and are
// handled on the backend's thread once the mask is restored. The relay creates every sink in
// such a scope (outbox_sink.h: THREADS); a sink uses one around calls that may start threads.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace outbox::sinks {

class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace outbox::sinks
