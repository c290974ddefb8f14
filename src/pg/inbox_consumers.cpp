// See inbox_consumers.hpp. The bindings are read once per backend into a hash table, and
// read again after the table changes: its trigger (outbox._inbox_consumers_changed) sends a
// relcache invalidation at every change, so inbox_receive's check is a hash lookup.
#include "pg/inbox_consumers.hpp"

#include <string>

#include "core/event_rules.hpp"
#include "core/inbox_rules.hpp"
#include "pg/boundary.hpp"
#include "pg/inbox_consumer_roles.hpp"
#include "pg/settings.hpp"
#include "pg/text_measure.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/trigger.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

namespace outbox::pg {
namespace {

// A name of kMaxNameChars characters, each of at most 4 bytes, and its NUL.
constexpr size_t kKeyBytes = 4 * kMaxNameChars + 1;

struct Binding {
  char consumer[kKeyBytes];  // hash key
  int count;
  Oid* roles;  // in Cache::context
};

// Per backend; trivially destructible.
struct Cache {
  MemoryContext context;  // holds names and its roles; reset at every load
  HTAB* names;
  Oid relid;       // outbox.inbox_consumers when last read
  uint64 changes;  // invalidations seen: a load that saw one is not trusted afterwards
  bool valid;
};
Cache cache{};

void forget(Datum, Oid relid) {
  if (OidIsValid(relid) && relid != cache.relid) return;
  cache.valid = false;
  ++cache.changes;
}

void add(Binding* binding, Oid role) {
  auto* roles =
      static_cast<Oid*>(MemoryContextAlloc(cache.context, sizeof(Oid) * (binding->count + 1)));
  if (binding->count > 0) memcpy(roles, binding->roles, sizeof(Oid) * binding->count);
  roles[binding->count++] = role;
  binding->roles = roles;
}

// Reads the table with a snapshot taken now (not the transaction's, which at REPEATABLE
// READ may predate a change whose invalidation this backend has already processed).
void read_bindings(Relation rel) {
  TupleDesc desc = RelationGetDescr(rel);
  if (desc->natts < 2 || TupleDescAttr(desc, 0)->atttypid != TEXTOID ||
      TupleDescAttr(desc, 1)->atttypid != REGROLEOID) {
    elog(ERROR, "outbox.inbox_consumers does not have the expected columns");
  }
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
  HeapTuple tuple;
  while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
    bool null_name = false;
    bool null_role = false;
    const Datum name = heap_getattr(tuple, 1, desc, &null_name);
    const Datum role = heap_getattr(tuple, 2, desc, &null_role);
    if (null_name || null_role) continue;
    const char* key = TextDatumGetCString(name);
    if (strlen(key) >= kKeyBytes) continue;  // no name inbox_receive accepts
    bool found = false;
    auto* binding = static_cast<Binding*>(hash_search(cache.names, key, HASH_ENTER, &found));
    if (!found) {
      binding->count = 0;
      binding->roles = nullptr;
    }
    add(binding, DatumGetObjectId(role));
  }
  table_endscan(scan);
  UnregisterSnapshot(snapshot);
}

void load() {
  static bool registered = false;
  if (!registered) {
    CacheRegisterRelcacheCallback(forget, 0);
    registered = true;
  }
  if (cache.context == nullptr) {
    cache.context =
        AllocSetContextCreate(TopMemoryContext, "outbox inbox consumers", ALLOCSET_SMALL_SIZES);
  }
  const uint64 before = cache.changes;
  cache.names = nullptr;
  cache.valid = false;
  MemoryContextReset(cache.context);
  HASHCTL ctl{};
  ctl.keysize = kKeyBytes;
  ctl.entrysize = sizeof(Binding);
  ctl.hcxt = cache.context;
  cache.names =
      hash_create("outbox inbox consumers", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
  const Oid schema = get_namespace_oid("outbox", true);
  cache.relid = OidIsValid(schema) ? get_relname_relid("inbox_consumers", schema) : InvalidOid;
  // Not there: the library is newer than the installed SQL (before ALTER EXTENSION
  // UPDATE), whose inbox has no bindings. Looked for again at the next call.
  if (!OidIsValid(cache.relid)) return;
  Relation rel = table_open(cache.relid, AccessShareLock);
  read_bindings(rel);
  table_close(rel, AccessShareLock);
  cache.valid = cache.changes == before;
}

enum class Verdict { kAllowed, kNotBound, kUnbound };

Verdict verdict(std::string_view name, Oid role) {
  return guard([&]() -> Verdict {
    if (!cache.valid) load();
    char key[kKeyBytes];
    const size_t bytes = name.size() < kKeyBytes ? name.size() : kKeyBytes - 1;
    memcpy(key, name.data(), bytes);
    key[bytes] = '\0';
    const auto* binding =
        static_cast<const Binding*>(hash_search(cache.names, key, HASH_FIND, nullptr));
    if (binding == nullptr) {
      return settings.inbox_require_binding ? Verdict::kUnbound : Verdict::kAllowed;
    }
    for (int i = 0; i < binding->count; ++i) {
      if (has_privs_of_role(role, binding->roles[i])) return Verdict::kAllowed;
    }
    return Verdict::kNotBound;
  });
}

std::string role_name(Oid role) {
  return guard([&]() -> const char* {
    const char* name = GetUserNameFromId(role, true);
    return name != nullptr ? name : "?";
  });
}

}  // namespace

void check_inbox_consumer(const char* function, std::string_view name, Oid role) {
  const Verdict v = verdict(name, role);
  if (v == Verdict::kAllowed) return;
  const std::string consumer(name);
  const std::string who = role_name(role);
  if (v == Verdict::kNotBound) {
    throw Error(sqlstate::kInsufficientPrivilege,
                std::string(function) + ": role \"" + who + "\" may not record for consumer \"" +
                    consumer + "\"",
                "The consumer \"" + consumer +
                    "\" is bound to other roles (outbox.inbox_consumers): only they, and the "
                    "roles that have their privileges, may use its records.",
                "Connect as the consumer's role, or, as the extension's owner, bind this role "
                "too: outbox.bind_inbox_consumer(consumer, role).");
  }
  throw Error(sqlstate::kInsufficientPrivilege,
              std::string(function) + ": consumer \"" + consumer +
                  "\" is bound to no role, and outbox.inbox_require_binding is on",
              "Role \"" + who +
                  "\" asked for it; with outbox.inbox_require_binding every "
                  "consumer name must be bound first.",
              "As the extension's owner: SELECT outbox.bind_inbox_consumer(consumer, role).");
}

}  // namespace outbox::pg

// Trigger of outbox.inbox_consumers, for each statement that changes it: every backend
// reads the bindings again (at this transaction's commit; this one at its next command),
// and the roles they name are recorded as dependencies (DROP ROLE refuses them).
OUTBOX_FUNCTION(outbox_inbox_consumers_changed) {
  using namespace outbox::pg;
  const Oid bindings = guard([&] {
    if (!CALLED_AS_TRIGGER(fcinfo)) elog(ERROR, "outbox: not called as a trigger");
    Relation rel = reinterpret_cast<TriggerData*>(fcinfo->context)->tg_relation;
    CacheInvalidateRelcache(rel);
    return RelationGetRelid(rel);
  });
  sync_binding_roles(bindings);
  return PointerGetDatum(nullptr);
}

// outbox._check_inbox_binding(consumer text, role regrole, bind bool): the arguments of
// bind_inbox_consumer (bind) or unbind_inbox_consumer, in one place: neither may be NULL, and
// a name to bind follows inbox_receive's rules. A name to unbind need not: the owner may have
// bound one by hand.
OUTBOX_FUNCTION(outbox_check_inbox_binding) {
  using namespace outbox::pg;
  const bool bind = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
  const char* function = bind ? "outbox.bind_inbox_consumer" : "outbox.unbind_inbox_consumer";
  const TextMeasure consumer = measure_text(PG_GETARG_DATUM(0), PG_ARGISNULL(0));
  outbox::check_not_null(function, "consumer", consumer.is_null);
  if (bind) {
    outbox::check_required_text(function, "consumer", false, consumer.chars);
    const std::string_view name = guard([&]() -> std::string_view {
      text* t = DatumGetTextPP(PG_GETARG_DATUM(0));
      return {VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)};
    });
    outbox::check_consumer_name(function, name);
  }
  outbox::check_not_null(function, "role", PG_ARGISNULL(1));
  PG_RETURN_VOID();
}
