// outbox_guard_test.so, a test module (make install does not install it; test/run-tests.sh
// does): an SQL function that throws inside guard() (src/pg/boundary.hpp), for TAP 043. A
// C++ exception there must reach the caller as an ERROR, never std::terminate, which would
// make the postmaster restart every connection.
#include <new>
#include <stdexcept>
#include <string>

#include "pg/boundary.hpp"

extern "C" {
PG_MODULE_MAGIC;
}

// outbox_guard_throw(kind text): throws `kind` inside a guarded call, after a palloc and a
// switch of memory context, as the relay's guarded lambdas do before a C++ call throws.
OUTBOX_FUNCTION(outbox_guard_throw) {
  const std::string kind = outbox::pg::guard([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  MemoryContext before = CurrentMemoryContext;
  outbox::pg::guard([&] {
    palloc(16);
    MemoryContextSwitchTo(TopMemoryContext);
    if (kind == "runtime_error") throw std::runtime_error("thrown inside guard()");
    if (kind == "bad_alloc") throw std::bad_alloc();
    if (kind == "nested") {
      outbox::pg::guard([] { throw std::logic_error("thrown inside a nested guard()"); });
    }
    if (kind == "pg_error") elog(ERROR, "a PostgreSQL error inside guard()");
    MemoryContextSwitchTo(before);
  });
  PG_RETURN_VOID();
}

// outbox_guard_context_kept(kind text): true when the memory context is the caller's again
// after the exception `kind` left guard().
OUTBOX_FUNCTION(outbox_guard_context_kept) {
  const std::string kind = outbox::pg::guard([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  MemoryContext before = CurrentMemoryContext;
  try {
    outbox::pg::guard([&] {
      MemoryContextSwitchTo(TopMemoryContext);
      if (kind == "runtime_error") throw std::runtime_error("thrown inside guard()");
    });
  } catch (const std::exception&) {
  }
  PG_RETURN_BOOL(CurrentMemoryContext == before);
}
