#include "core/histogram.hpp"

#include <algorithm>

namespace outbox::histogram {

int bucket_of(const double* bounds, int n, double value) {
  return static_cast<int>(std::lower_bound(bounds, bounds + n, value) - bounds);
}

}  // namespace outbox::histogram
