// The oldest started batch of a pipelining sink (Kafka's, NATS'), as its finish() holds it:
// dropped however finish() leaves, by return or by throw, so that no outcome of it is
// written later. Made after the lock that guards the batches, it drops the batch with the
// lock still held.
#pragma once

#include <deque>

namespace outbox::sinks {

template <typename Batch>
class OldestBatch {
 public:
  explicit OldestBatch(std::deque<Batch>& batches) : batches_(batches) {}
  ~OldestBatch() { batches_.pop_front(); }
  OldestBatch(const OldestBatch&) = delete;
  OldestBatch& operator=(const OldestBatch&) = delete;
  Batch& get() const { return batches_.front(); }

 private:
  std::deque<Batch>& batches_;
};

}  // namespace outbox::sinks
