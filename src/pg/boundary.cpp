#include "pg/boundary.hpp"

#include <cstring>

namespace outbox::pg::detail {

ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept {
  MemoryContext context = CurrentMemoryContext;
  ErrorData* volatile error = nullptr;
  PG_TRY();
  { fn(arg); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(
        AllocSetContextCreate(TopMemoryContext, "outbox PgError", ALLOCSET_SMALL_SIZES));
    error = CopyErrorData();
    FlushErrorState();
    MemoryContextSwitchTo(context);
  }
  PG_END_TRY();
  return error;
}

}  // namespace outbox::pg::detail

namespace outbox::pg {

void log_error(ErrorData* error) noexcept {
  error->elevel = LOG;
  error->output_to_client = false;
  ErrorData* failed =
      detail::run_guarded([](void* e) { ThrowErrorData(static_cast<ErrorData*>(e)); }, error);
  detail::delete_error(failed);
}

}  // namespace outbox::pg

namespace outbox::pg::detail {

void delete_error(ErrorData* error) noexcept {
  if (error != nullptr) MemoryContextDelete(GetMemoryChunkContext(error));
}

ErrorData* copy_error(const ErrorData* error) noexcept {
  ErrorData* volatile copy = nullptr;
  PG_TRY();
  {
    // As CopyErrorData() does, every string: ReThrowError() keeps some of them (filename,
    // funcname, domain) by pointer.
    ErrorData* out = static_cast<ErrorData*>(palloc(sizeof(ErrorData)));
    std::memcpy(out, error, sizeof(ErrorData));
    for (const char** field :
         {&out->filename, &out->funcname, &out->domain, &out->context_domain, &out->message_id}) {
      if (*field != nullptr) *field = pstrdup(*field);
    }
    for (char** field : {&out->message, &out->detail, &out->detail_log, &out->hint, &out->context,
                         &out->backtrace, &out->schema_name, &out->table_name, &out->column_name,
                         &out->datatype_name, &out->constraint_name, &out->internalquery}) {
      if (*field != nullptr) *field = pstrdup(*field);
    }
    out->assoc_context = CurrentMemoryContext;
    copy = out;
  }
  PG_CATCH();
  {
    FlushErrorState();
    copy = nullptr;
  }
  PG_END_TRY();
  return copy;
}

char* copy_text(const char* text) noexcept {
  const size_t size = std::strlen(text) + 1;
  auto* copy = static_cast<char*>(palloc_extended(size, MCXT_ALLOC_NO_OOM));
  if (copy != nullptr) std::memcpy(copy, text, size);
  return copy;
}

void raise(const Caught& what) {
  if (what.pg_error != nullptr) {
    ReThrowError(what.pg_error);
  }
  if (what.message == nullptr) {
    ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg_internal("outbox: out of memory")));
  }
  const char* code = what.code;
  ereport(ERROR, (errcode(MAKE_SQLSTATE(code[0], code[1], code[2], code[3], code[4])),
                  errmsg_internal("%s%s", what.prefix, what.message),
                  what.detail ? errdetail_internal("%s", what.detail) : 0,
                  what.hint ? errhint("%s", what.hint) : 0, errhidestmt(what.hide_statement),
                  errhidecontext(what.hide_statement)));
  pg_unreachable();
}

}  // namespace outbox::pg::detail
