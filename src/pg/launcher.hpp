// The launcher: a background worker that starts the relay workers and restarts them
// (pg/launcher.cpp says why).
#pragma once

namespace outbox::pg {

// _PG_init, while preloading: registers the launcher with the postmaster.
void register_launcher();

}  // namespace outbox::pg
