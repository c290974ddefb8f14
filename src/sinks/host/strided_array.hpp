// An array of C structs laid out with a plugin's stride (the message_size and outcome_size
// of its table): a plugin built against an older outbox_sink.h reads the fields it knows at
// the right places, and one built against a newer one finds the fields the relay does not
// know zeroed. Each element is copied in and out by memcpy of the shorter of the two sizes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace outbox::sinks {

class StridedArray {
 public:
  // count elements of `stride` bytes (a multiple of 8, the structs' alignment), zeroed.
  void reset(std::size_t count, std::size_t stride) {
    stride_ = stride;
    words_.assign((count * stride + 7) / 8, 0);
  }
  void* data() { return words_.data(); }

  template <typename T>
  void put(std::size_t i, const T& value) {
    std::memcpy(bytes() + i * stride_, &value, std::min(stride_, sizeof(T)));
  }
  template <typename T>
  T get(std::size_t i) const {
    T value{};
    std::memcpy(&value, bytes() + i * stride_, std::min(stride_, sizeof(T)));
    return value;
  }

 private:
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(words_.data()); }
  const unsigned char* bytes() const {
    return reinterpret_cast<const unsigned char*>(words_.data());
  }

  std::vector<std::uint64_t> words_;  // 8-aligned
  std::size_t stride_ = 0;
};

}  // namespace outbox::sinks
