// The members of a JSON object, one at a time: the one way the extension reads a flat jsonb
// object (event headers, enqueue_batch elements, sink options).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// Calls f(key, value) for each member of `object`, in jsonb's order (keys sorted), until f
// returns false; returns false if f did. A nested object or array comes as one value of
// type jbvBinary. The key's text points into `object`. PostgreSQL code: call it inside
// guard(), with an f that owns no objects with destructors.
template <typename F>
bool for_each_member(JsonbContainer* object, F&& f) {
  JsonbIterator* it = JsonbIteratorInit(object);
  JsonbValue key{};
  JsonbValue v;
  JsonbIteratorToken token;
  while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
    if (token == WJB_KEY) {
      key = v;
    } else if (token == WJB_VALUE && !f(key, v)) {
      return false;
    }
  }
  return true;
}

}  // namespace outbox::pg
