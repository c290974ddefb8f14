// The ProcessUtility hook that clears the way for DROP DATABASE and the commands like it,
// and wakes the relay at COMMIT PREPARED (database_commands.cpp says how).
#pragma once

namespace outbox::pg {

// Preload only: installs the hook; called once from _PG_init.
void relay_register_database_commands();

}  // namespace outbox::pg
