// Errors raised by outbox code for the user. Plain C++: no PostgreSQL header here.
// The PostgreSQL boundary (src/pg/boundary.hpp) turns an outbox::Error into an ERROR
// with the same SQLSTATE; any other std::exception becomes an internal error.
#pragma once

#include <stdexcept>
#include <string>

namespace outbox {

// Five-character SQLSTATE codes used by outbox (see PostgreSQL Appendix A).
namespace sqlstate {
inline constexpr const char* kNullValueNotAllowed = "22004";
inline constexpr const char* kInvalidParameterValue = "22023";
inline constexpr const char* kStringDataRightTruncation = "22001";
inline constexpr const char* kUniqueViolation = "23505";
inline constexpr const char* kInsufficientPrivilege = "42501";
inline constexpr const char* kProgramLimitExceeded = "54000";
inline constexpr const char* kObjectNotInPrerequisiteState = "55000";
inline constexpr const char* kInternalError = "XX000";
}  // namespace sqlstate

class Error : public std::runtime_error {
 public:
  Error(const char* code, const std::string& message, std::string detail = {},
        std::string hint = {})
      : std::runtime_error(message),
        code_(code),
        detail_(std::move(detail)),
        hint_(std::move(hint)) {}

  const char* code() const noexcept { return code_; }
  const std::string& detail() const noexcept { return detail_; }
  const std::string& hint() const noexcept { return hint_; }
  // Whether the server log leaves out the statement that failed and the error's context
  // (errhidestmt, errhidecontext): for errors about statements that may carry credentials,
  // such as outbox.configure_sink's. The client still gets both.
  bool hide_statement() const noexcept { return hide_statement_; }
  void set_hide_statement(bool hide) noexcept { hide_statement_ = hide; }

 private:
  const char* code_;
  std::string detail_;
  std::string hint_;
  bool hide_statement_ = false;
};

}  // namespace outbox
