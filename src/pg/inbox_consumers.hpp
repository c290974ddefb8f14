// Consumer names bound to roles (outbox.inbox_consumers, docs/security.md): who may record
// under a name in the consumer's inbox.
#pragma once

#include <string_view>

#include "pg/postgres.hpp"

namespace outbox::pg {

// Throws outbox::Error 42501 unless `role` may record under consumer `name` (its bytes,
// already checked by core/inbox_rules.hpp): a name bound to roles takes one of them (or a
// role that has its privileges); a name bound to none takes any role, unless
// outbox.inbox_require_binding is on. `function` prefixes the message.
void check_inbox_consumer(const char* function, std::string_view name, Oid role);

}  // namespace outbox::pg
