// What every unit test that waits shares: a deadline that only bounds a hang, and a wait for a
// condition. No test asserts that something ended within a time (a loaded CI machine under
// the sanitizers breaks any such window; "not before its deadline" holds on any machine): it
// waits for what it expects, or checks why a wait ended (an ack, an error, an observer), and
// gives up after kLongDeadline.
#pragma once

#include <chrono>
#include <thread>

namespace outbox::test {

// Long enough that only a hang reaches it: a batch timeout that must not be what ends a
// wait, or how long to wait for a condition.
inline constexpr std::chrono::seconds kLongDeadline{60};

// Polls `done` every few milliseconds until it holds (true) or `timeout` has passed (false).
template <typename Done>
bool wait_until(Done done, std::chrono::milliseconds timeout = kLongDeadline) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace outbox::test
