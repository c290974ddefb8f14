#include "core/replay_progress.hpp"

namespace outbox::replay {

Progress advance(std::int64_t position, const std::int64_t* seqs, const Outcome* outcomes, int n) {
  Progress p{position, 0, 0, -1};
  for (int i = 0; i < n; ++i) {
    if (outcomes[i] == Outcome::kNotSent) {
      p.first_not_sent = i;
      break;
    }
    p.position = seqs[i];
    (outcomes[i] == Outcome::kSent ? p.sent : p.skipped) += 1;
  }
  return p;
}

}  // namespace outbox::replay
