// The steady clock in seconds, for the time splits the data-parallel parts report. Internal to
// hoop_train.
#pragma once

#include <chrono>

namespace hoop::train::detail {

/// Seconds since an arbitrary fixed point.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace hoop::train::detail
