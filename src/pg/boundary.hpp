// The boundary between C++ and PostgreSQL error handling. Drawn here, once.
//
// PostgreSQL reports an ERROR with longjmp, which must never jump over a C++ frame whose
// destructors need to run; and a C++ exception must never unwind into PostgreSQL.
//  - Every SQL-callable function is defined with OUTBOX_FUNCTION. Its body runs under
//    invoke(), which catches every C++ exception and raises the ERROR only after all C++
//    frames and the exception object are gone. outbox::Error keeps its SQLSTATE.
//  - C++ code calls PostgreSQL through guard(). The lambda given to guard() must not own
//    objects with destructors. A PostgreSQL ERROR inside it is copied, the error state is
//    flushed, and it continues as a PgError exception; invoke() re-raises it unchanged
//    (same SQLSTATE, message, detail, context). The transaction is then aborted by
//    PostgreSQL as usual: a PgError is never swallowed.
//  - An outbox::Error with hide_statement() set is raised with errhidestmt and
//    errhidecontext: the server log repeats neither the statement nor the context (which
//    quotes the statement of an EXECUTE), whose text may hold credentials.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "pg/postgres.hpp"

namespace outbox::pg {

class PgError : public std::exception {
 public:
  explicit PgError(ErrorData* data) : data_(data) {}
  ErrorData* data() const noexcept { return data_; }
  const char* what() const noexcept override {
    return data_ && data_->message ? data_->message : "PostgreSQL error";
  }

 private:
  ErrorData* data_;  // palloc'd in the memory context that was current at guard()
};

namespace detail {
// Runs fn(arg) under PG_TRY. Returns nullptr on success, or the copied error (allocated in
// the memory context current at the call) with the error state flushed. fn must not throw:
// a C++ exception here would leave PostgreSQL's error stack pointing at a dead frame, so
// noexcept turns that bug into std::terminate.
ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept;
// Raises `error` (or an ERROR built from the C++ message) as a PostgreSQL ERROR.
[[noreturn]] void raise(ErrorData* pg_error, const char* code, const char* message,
                        const char* detail, const char* hint, bool hide_statement);
}  // namespace detail

template <typename Fn>
auto guard(Fn&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  using Callable = std::remove_reference_t<Fn>;
  if constexpr (std::is_void_v<Result>) {
    ErrorData* error = detail::run_guarded([](void* f) { (*static_cast<Callable*>(f))(); }, &fn);
    if (error != nullptr) throw PgError(error);
  } else {
    static_assert(std::is_trivially_destructible_v<Result>,
                  "guard() returns PostgreSQL values, not C++ objects");
    struct Call {
      Callable* fn;
      Result result;
    } call{&fn, Result{}};
    ErrorData* error = detail::run_guarded(
        [](void* c) {
          auto* self = static_cast<Call*>(c);
          self->result = (*self->fn)();
        },
        &call);
    if (error != nullptr) throw PgError(error);
    return call.result;
  }
}

template <typename Fn>
Datum invoke(Fn&& fn) noexcept {
  ErrorData* pg_error = nullptr;
  const char* code = nullptr;
  char* message = nullptr;
  char* detail = nullptr;
  char* hint = nullptr;
  bool hide_statement = false;
  try {
    return fn();
  } catch (const PgError& e) {
    pg_error = e.data();
  } catch (const outbox::Error& e) {
    code = e.code();
    message = pstrdup(e.what());
    detail = e.detail().empty() ? nullptr : pstrdup(e.detail().c_str());
    hint = e.hint().empty() ? nullptr : pstrdup(e.hint().c_str());
    hide_statement = e.hide_statement();
  } catch (const std::bad_alloc&) {
    code = "53200";  // out_of_memory
    message = pstrdup("outbox: out of memory");
  } catch (const std::exception& e) {
    code = sqlstate::kInternalError;
    message = psprintf("outbox: internal error: %s", e.what());
  } catch (...) {
    code = sqlstate::kInternalError;
    message = pstrdup("outbox: internal error: unknown C++ exception");
  }
  // Every C++ frame below this one has unwound and the exception object is destroyed.
  detail::raise(pg_error, code, message, detail, hint, hide_statement);
}

}  // namespace outbox::pg

// Defines an SQL-callable function NAME whose body runs under invoke().
#define OUTBOX_FUNCTION(name)                                                         \
  static Datum name##_body(FunctionCallInfo fcinfo);                                  \
  extern "C" {                                                                        \
  PG_FUNCTION_INFO_V1(name);                                                          \
  }                                                                                   \
  Datum name(PG_FUNCTION_ARGS) {                                                      \
    return ::outbox::pg::invoke([fcinfo]() -> Datum { return name##_body(fcinfo); }); \
  }                                                                                   \
  static Datum name##_body(FunctionCallInfo fcinfo)
