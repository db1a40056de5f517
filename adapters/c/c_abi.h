// What the C ABI's files share: the boundary that turns every C++ outcome (a Status, a
// hoop::Error, any other exception) into a hoop_status_t and the thread's last-error message,
// and the checked conversions of C enum values, which may hold anything a C caller put there.
#pragma once

#include <cstring>
#include <string_view>
#include <type_traits>

#include "hoop/c.h"
#include "hoop/core.h"

namespace hoop::c_abi {

/// Records `status`'s message as this thread's last error (when not ok) and returns its code.
hoop_status_t report(const Status& status);

/// The status of whatever `body` threw, for the boundary's catch-all (call inside a catch).
Status current_exception_status();

/// Runs `body` (returning Status) so that no exception leaves it: the C boundary.
template <typename F>
hoop_status_t guard(F&& body) noexcept {
  try {
    return report(body());
  } catch (...) {
    return report(current_exception_status());
  }
}

/// Runs `body` (returning int) for a C function whose failure value is -1.
template <typename F>
int guard_int(F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    report(current_exception_status());
    return -1;
  }
}

/// invalid_argument naming `what` when `pointer` is null.
Status check_not_null(const void* pointer, std::string_view what);

/// The integer a C caller stored in an enum argument or field, read as bytes: C lets any int
/// sit there, and loading one outside the enumerators as the enum type is undefined in C++
/// (UBSan stops on it).
template <typename E>
long long raw_enum(const E& value) {
  std::underlying_type_t<E> raw;
  std::memcpy(&raw, &value, sizeof raw);
  return static_cast<long long>(raw);
}

/// The C++ values of C enum values, or invalid_argument naming the argument.
Result<DataType> dtype_of(const hoop_dtype_t& dtype);
Result<ReduceOp> op_of(const hoop_reduce_op_t& op);

}  // namespace hoop::c_abi
