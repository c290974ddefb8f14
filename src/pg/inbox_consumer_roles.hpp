// The roles named in outbox.inbox_consumers, recorded as shared dependencies (pg_shdepend),
// so that DROP ROLE refuses a role a consumer name is bound to (docs/security.md).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// Makes pg_shdepend hold one dependency of the column "role" of `bindings` (the table
// outbox.inbox_consumers) on each role its rows name, and no other: the kind a privilege on
// the column records, the one DROP ROLE names ("privileges for column role of table
// inbox_consumers"). Throws outbox::pg::PgError (42704) for a role that does not exist.
void sync_binding_roles(Oid bindings);

}  // namespace outbox::pg
