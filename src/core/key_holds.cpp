#include "core/key_holds.hpp"

#include <algorithm>
#include <set>

namespace outbox {

std::string KeyHolds::key(std::string_view aggregatetype, std::string_view aggregateid) {
  std::string out = std::to_string(aggregatetype.size());
  out += ':';
  out.append(aggregatetype);
  out.append(aggregateid);
  return out;
}

void KeyHolds::set(std::string_view aggregatetype, std::string_view aggregateid, Hold hold) {
  holds_[key(aggregatetype, aggregateid)] = hold;
}

void KeyHolds::failed(std::string_view aggregatetype, std::string_view aggregateid, Hold hold) {
  auto [it, added] = holds_.try_emplace(key(aggregatetype, aggregateid), hold);
  if (added) return;
  // The earliest unresolved event stays the blocker; a failure of the blocker itself moves
  // its time.
  if (hold.seq <= it->second.seq) it->second = hold;
}

const KeyHolds::Hold* KeyHolds::find(std::string_view aggregatetype,
                                     std::string_view aggregateid) const {
  if (holds_.empty()) return nullptr;
  auto it = holds_.find(key(aggregatetype, aggregateid));
  return it == holds_.end() ? nullptr : &it->second;
}

std::int64_t KeyHolds::earliest_at(std::int64_t none) const {
  std::int64_t out = none;
  for (const auto& entry : holds_) out = std::min(out, entry.second.at);
  return out;
}

std::vector<std::int64_t> KeyHolds::decide(const std::vector<Key>& keys,
                                           const std::vector<std::int64_t>& seqs) const {
  std::vector<std::int64_t> out(keys.size(), -1);
  if (holds_.empty()) return out;
  // The blockers that are in the batch: what follows them goes out behind them.
  std::set<std::int64_t> in_batch(seqs.begin(), seqs.end());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Hold* hold = find(keys[i].aggregatetype, keys[i].aggregateid);
    if (hold == nullptr || seqs[i] <= hold->seq) continue;
    if (in_batch.count(hold->seq) != 0) continue;
    out[i] = hold->at;
  }
  return out;
}

}  // namespace outbox
