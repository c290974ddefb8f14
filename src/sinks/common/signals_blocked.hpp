// Every signal blocked while it lives, on the calling thread (outbox_sink_signals.h, the
// helper installed for every sink): threads a client library starts meanwhile (curl's
// resolver, cnats' reconnect thread) inherit the mask. The relay creates every sink in such
// a scope; a sink uses one around calls that may start threads.
#pragma once

#include "include/outbox_sink_signals.h"

namespace outbox::sinks {

class SignalsBlocked {
 public:
  SignalsBlocked() { outbox_sink_block_signals(&saved_); }
  ~SignalsBlocked() { outbox_sink_restore_signals(&saved_); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace outbox::sinks
