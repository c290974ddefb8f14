// The launcher: a background worker that starts the relay workers and restarts them
// (relay/launcher.cpp says why).
#pragma once

namespace outbox::pg::relay {

// _PG_init, while preloading: registers the launcher with the postmaster.
void register_launcher();

}  // namespace outbox::pg::relay
