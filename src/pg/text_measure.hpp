// The length of a text argument, for the checks of core/event_rules.hpp.
#pragma once

#include "core/event_rules.hpp"
#include "pg/boundary.hpp"

namespace outbox::pg {

struct TextMeasure {
  bool is_null;
  size_t chars;
};

// Counts characters only when the bytes exceed kMaxNameChars (each character is a byte or
// more). C-style: call inside guard().
inline TextMeasure read_text_measure(Datum value, bool is_null) {
  if (is_null) return {true, 0};
  text* t = DatumGetTextPP(value);
  size_t bytes = VARSIZE_ANY_EXHDR(t);
  if (bytes <= kMaxNameChars) return {false, bytes};
  return {false, static_cast<size_t>(pg_mbstrlen_with_len(VARDATA_ANY(t), bytes))};
}

inline TextMeasure measure_text(Datum value, bool is_null) {
  return guard([&] { return read_text_measure(value, is_null); });
}

}  // namespace outbox::pg
