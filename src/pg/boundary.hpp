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
//  - A C++ exception the lambda throws is caught inside the guarded frame (no C++ unwinding
//    crosses PostgreSQL's setjmp) and thrown again once guard() has left it: an error like
//    any other, never std::terminate. (A callback PostgreSQL calls, such as a DestReceiver,
//    must not throw: its exception would have to unwind PostgreSQL's C frames.)
//  - A PgError owns its copy of the error, in a memory context of its own: it stays valid
//    for as long as the exception, whatever the caller frees (a transaction abort frees
//    the context that was current at guard()).
//  - An outbox::Error with hide_statement() set is raised with errhidestmt and
//    errhidecontext: the server log repeats neither the statement nor the context (which
//    quotes the statement of an EXECUTE), whose text may hold credentials.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "pg/postgres.hpp"

namespace outbox::pg {

namespace detail {
// Deletes the memory context that holds `error` (one made by run_guarded()).
void delete_error(ErrorData* error) noexcept;
}  // namespace detail

class PgError : public std::exception {
 public:
  // Takes `data` from run_guarded(); the copies of the exception share it, and the last
  // one deletes it.
  explicit PgError(ErrorData* data) : data_(data, detail::delete_error) {}
  ErrorData* data() const noexcept { return data_.get(); }
  const char* what() const noexcept override {
    return data_ && data_->message ? data_->message : "PostgreSQL error";
  }

 private:
  std::shared_ptr<ErrorData> data_;
};

namespace detail {
// Runs fn(arg) under PG_TRY. Returns nullptr on success, or the copied error (in a new
// memory context under TopMemoryContext, for PgError to own) with the error state flushed.
// fn must not throw (guard()'s trampolines catch everything): a C++ exception here would
// leave PostgreSQL's error stack pointing at a dead frame, so noexcept turns that bug into
// std::terminate.
ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept;

// What invoke() raises. The copies it makes in a catch block never raise an ERROR (no
// longjmp may leave a catch block): they return nullptr when memory is short.
struct Caught {
  ErrorData* pg_error = nullptr;  // re-raised as it is
  const char* code = nullptr;
  const char* prefix = "";
  const char* message = nullptr;  // nullptr: a copy failed, raise out_of_memory
  const char* detail = nullptr;
  const char* hint = nullptr;
  bool hide_statement = false;  // outbox::Error::hide_statement()
};
// A copy of `error` in the current memory context, or nullptr.
ErrorData* copy_error(const ErrorData* error) noexcept;
// A copy of `text` in the current memory context, or nullptr.
char* copy_text(const char* text) noexcept;
// Raises what invoke() caught as a PostgreSQL ERROR.
[[noreturn]] void raise(const Caught& what);

// Runs fn() and keeps what it throws, with the memory context it was called in restored.
template <typename Fn>
void run_keeping_exception(Fn&& fn, std::exception_ptr& thrown) noexcept {
  MemoryContext context = CurrentMemoryContext;
  try {
    fn();
  } catch (...) {
    MemoryContextSwitchTo(context);
    thrown = std::current_exception();
  }
}
}  // namespace detail

// Logs a copied error at LOG, to the server log only, where nothing above would catch an
// ERROR (the catch blocks of a worker's entry point); an error while logging is dropped.
void log_error(ErrorData* error) noexcept;

template <typename Fn>
auto guard(Fn&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  using Callable = std::remove_reference_t<Fn>;
  if constexpr (std::is_void_v<Result>) {
    struct Call {
      Callable* fn;
      std::exception_ptr thrown;
    } call{&fn, nullptr};
    ErrorData* error = detail::run_guarded(
        [](void* c) {
          auto* self = static_cast<Call*>(c);
          detail::run_keeping_exception([self] { (*self->fn)(); }, self->thrown);
        },
        &call);
    if (error != nullptr) throw PgError(error);
    if (call.thrown) std::rethrow_exception(call.thrown);
  } else {
    static_assert(std::is_trivially_destructible_v<Result>,
                  "guard() returns PostgreSQL values, not C++ objects");
    struct Call {
      Callable* fn;
      Result result;
      std::exception_ptr thrown;
    } call{&fn, Result{}, nullptr};
    ErrorData* error = detail::run_guarded(
        [](void* c) {
          auto* self = static_cast<Call*>(c);
          detail::run_keeping_exception([self] { self->result = (*self->fn)(); }, self->thrown);
        },
        &call);
    if (error != nullptr) throw PgError(error);
    if (call.thrown) std::rethrow_exception(call.thrown);
    return call.result;
  }
}

template <typename Fn>
Datum invoke(Fn&& fn) noexcept {
  // Copied into the current memory context: the exception object, and a PgError's own
  // copy with it, is destroyed when its catch block ends.
  detail::Caught caught;
  try {
    return fn();
  } catch (const PgError& e) {
    caught.pg_error = detail::copy_error(e.data());
  } catch (const outbox::Error& e) {
    caught.code = e.code();
    caught.message = detail::copy_text(e.what());
    caught.detail = e.detail().empty() ? nullptr : detail::copy_text(e.detail().c_str());
    caught.hint = e.hint().empty() ? nullptr : detail::copy_text(e.hint().c_str());
    caught.hide_statement = e.hide_statement();
  } catch (const std::bad_alloc&) {
    caught.code = "53200";  // out_of_memory
    caught.message = "outbox: out of memory";
  } catch (const std::exception& e) {
    caught.code = sqlstate::kInternalError;
    caught.prefix = "outbox: internal error: ";
    caught.message = detail::copy_text(e.what());
  } catch (...) {
    caught.code = sqlstate::kInternalError;
    caught.message = "outbox: internal error: unknown C++ exception";
  }
  // Every C++ frame below this one has unwound and the exception object is destroyed.
  detail::raise(caught);
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
