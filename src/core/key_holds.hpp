// Which keys are held back: a key whose earliest unresolved event waits for a
// retry. Its later events are not sent before it; they wait on the retry path with its retry
// time, and go out behind it in seq order. A dead-lettered event releases its key. Plain C++.
//
// The relay reloads the holds of its shards from outbox.events whenever it looks for due
// retries (they are then exact), and adds to them between reloads as its own events are
// rejected; nothing else makes a retry of its shards in between.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace outbox {

class KeyHolds {
 public:
  struct Hold {
    std::int64_t seq;  // the key's earliest event waiting for a retry (the blocker)
    std::int64_t at;   // its retry time (the caller's clock)
  };

  void clear() { holds_.clear(); }
  bool empty() const { return holds_.empty(); }
  std::size_t size() const { return holds_.size(); }
  // From a reload: the key's blocker.
  void set(std::string_view aggregatetype, std::string_view aggregateid, Hold hold);
  // The event `seq` of the key was rejected and waits until `at`, or dead-lettered (then
  // `at` is now: what waits behind it is due).
  void failed(std::string_view aggregatetype, std::string_view aggregateid, Hold hold);
  const Hold* find(std::string_view aggregatetype, std::string_view aggregateid) const;
  // The earliest retry time of any hold; `none` when there is none.
  std::int64_t earliest_at(std::int64_t none) const;

  // One fetched batch in the order it would be sent: keys[i] = {aggregatetype, aggregateid}
  // and seqs[i]. Returns, for each row, -1 when it may be sent, else the time to put it back
  // on the retry path with: its key's blocker is not in the batch ahead of it.
  struct Key {
    std::string_view aggregatetype, aggregateid;
  };
  std::vector<std::int64_t> decide(const std::vector<Key>& keys,
                                   const std::vector<std::int64_t>& seqs) const;

  // A key as one string; the type's length first, so that ("a", "bc") and ("ab", "c") differ.
  static std::string key(std::string_view aggregatetype, std::string_view aggregateid);

 private:
  std::map<std::string, Hold, std::less<>> holds_;
};

}  // namespace outbox
