#include "core/shards.hpp"

namespace outbox::shards {

Mask preferred(int worker, int workers) {
  Mask mask = 0;
  if (workers < 1 || worker < 0 || worker >= workers) return mask;
  for (int s = worker; s < kShards; s += workers) mask |= Mask{1} << s;
  return mask;
}

int preferred_owner(int s, int workers) { return workers < 1 ? 0 : s % workers; }

int count(Mask mask) { return __builtin_popcountll(mask); }

std::string array_literal(Mask mask) {
  std::string out = "{";
  for (int s = 0; s < kShards; ++s) {
    if (!(mask & (Mask{1} << s))) continue;
    if (out.size() > 1) out += ',';
    out += std::to_string(s);
  }
  return out + "}";
}

std::string predicate(Mask owned) {
  if (owned == kAll) return "";
  return " AND outbox.shard_of(aggregatetype, aggregateid) OPERATOR(pg_catalog.=) ANY ('" +
         array_literal(owned) + "'::pg_catalog.int4[])";
}

}  // namespace outbox::shards
