/*
 * outbox_sink_signals.h: PostgreSQL's signal handlers must never run on a sink's own threads.
 * A thread inherits its creator's signal mask, so block every signal around starting one (or
 * around a client library call that may start one); signals that arrive meanwhile stay
 * pending and run on the relay's thread once the mask is restored. create() already runs
 * with every signal blocked. POSIX: with -std=c11, define _POSIX_C_SOURCE 200809L before
 * the first #include (gnu11 and C++ need nothing).
 */
#ifndef OUTBOX_SINK_SIGNALS_H
#define OUTBOX_SINK_SIGNALS_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>

static inline void outbox_sink_block_signals(sigset_t* saved) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, saved);
}

static inline void outbox_sink_restore_signals(const sigset_t* saved) {
  pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* pthread_create(), with every signal blocked in the new thread. */
static inline int outbox_sink_thread_create(pthread_t* thread, const pthread_attr_t* attr,
                                            void* (*start)(void*), void* arg) {
  sigset_t saved;
  outbox_sink_block_signals(&saved);
  const int rc = pthread_create(thread, attr, start, arg);
  outbox_sink_restore_signals(&saved);
  return rc;
}

#endif /* OUTBOX_SINK_SIGNALS_H */
