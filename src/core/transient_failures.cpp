#include "core/transient_failures.hpp"

#include "core/key_holds.hpp"

namespace outbox {

int TransientFailures::failed(std::string_view aggregatetype, std::string_view aggregateid) {
  std::string key = KeyHolds::key(aggregatetype, aggregateid);
  auto found = counts_.find(key);
  if (found != counts_.end()) return ++found->second;
  // Bounded memory under a storm of failing keys: forgetting only shortens waits.
  if (counts_.size() >= kMaxKeys) counts_.clear();
  counts_.emplace(std::move(key), 1);
  return 1;
}

void TransientFailures::delivered(std::string_view aggregatetype, std::string_view aggregateid) {
  if (counts_.empty()) return;
  counts_.erase(KeyHolds::key(aggregatetype, aggregateid));
}

}  // namespace outbox
