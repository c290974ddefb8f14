#include "pg/boundary.hpp"

namespace outbox::pg::detail {

ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept {
  MemoryContext context = CurrentMemoryContext;
  ErrorData* volatile error = nullptr;
  PG_TRY();
  { fn(arg); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    error = CopyErrorData();
    FlushErrorState();
  }
  PG_END_TRY();
  return error;
}

void raise(ErrorData* pg_error, const char* code, const char* message, const char* detail,
           const char* hint, bool hide_statement) {
  if (pg_error != nullptr) {
    ReThrowError(pg_error);
  }
  ereport(ERROR, (errcode(MAKE_SQLSTATE(code[0], code[1], code[2], code[3], code[4])),
                  errmsg_internal("%s", message), detail ? errdetail_internal("%s", detail) : 0,
                  hint ? errhint("%s", hint) : 0, errhidestmt(hide_statement),
                  errhidecontext(hide_statement)));
  pg_unreachable();
}

}  // namespace outbox::pg::detail
