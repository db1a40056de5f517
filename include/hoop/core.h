/// @file
/// hoop core types: element types, reduction operators, and the error model.
///
/// Library functions that can fail return hoop::Status or hoop::Result<T>; they never abort
/// the process. hoop::Error is the one exception type thrown at the public C++ API boundary
/// (by Result<T>::value() on failure, and by the high-level runtime API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

/// hoop's C++ API: the runtime, the Communicator, the rendezvous and the transport contract.
namespace hoop {

/// Element types understood by every collective. f16 is IEEE binary16, bf16 is bfloat16.
/// kI16 comes last so that the values of the others (which travel in messages) stay as they
/// were.
enum class DataType : std::uint8_t { kU8, kI8, kI32, kI64, kF16, kBF16, kF32, kF64, kI16 };

/// Reduction operators. kAvg reduces with a sum and divides by the number of contributors
/// (integer types: truncating division). kAdasum (allreduce of floating-point data only) is
/// not element-wise: it combines whole vectors pairwise, a and b giving
/// (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, as in the Adasum paper (Maleki et al., 2020):
/// orthogonal gradients add up, parallel ones average.
enum class ReduceOp : std::uint8_t { kSum, kAvg, kMin, kMax, kProd, kAdasum };

/// Every DataType, for code that covers them all (as many entries as there are types).
inline constexpr DataType kAllDataTypes[] = {DataType::kU8,  DataType::kI8,  DataType::kI16,
                                             DataType::kI32, DataType::kI64, DataType::kF16,
                                             DataType::kBF16, DataType::kF32, DataType::kF64};
/// The element-wise reduction operators: every ReduceOp but kAdasum.
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProd};

/// Where memory lives: kCpuDevice (host memory), or a CUDA device ordinal.
inline constexpr int kCpuDevice = -1;

/// Size in bytes of one element of `dtype`.
std::size_t dtype_size(DataType dtype);
/// Short name of `dtype` as used on the command line and in tables ("f32", "bf16", ...).
std::string_view dtype_name(DataType dtype);
/// Short name of `op` ("sum", "avg", "min", "max", "prod", "adasum").
std::string_view op_name(ReduceOp op);
/// True for f16, bf16, f32 and f64.
bool dtype_is_float(DataType dtype);
/// Parses a dtype name (also accepts "float32", "float", "half", "bfloat16", "int32", ...).
std::optional<DataType> parse_dtype(std::string_view name);
/// Parses an op name (also accepts "average", "product").
std::optional<ReduceOp> parse_op(std::string_view name);

/// Converts `count` floats to f16 or bf16 bit patterns and back, as hoop's reductions do (for
/// callers that compress to 16 bits themselves, such as fp16 gradient compression): narrowing
/// rounds to nearest even whatever the floating-point environment, NaN stays NaN, values
/// beyond the format become Inf, and widening is exact. `src` and `dst` must not overlap.
void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t count);
/// Widens `count` f16 bit patterns to floats (exact); see f32_to_f16.
void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t count);
/// Narrows `count` floats to bf16 bit patterns; see f32_to_f16.
void f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t count);
/// Widens `count` bf16 bit patterns to floats (exact); see f32_to_f16.
void bf16_to_f32(const std::uint16_t* src, float* dst, std::size_t count);

/// What went wrong, coarsely; the message says precisely.
enum class StatusCode : std::uint8_t {
  kOk,               ///< success
  kInvalidArgument,  ///< the caller passed something unusable (null buffer, bad count, bad env)
  kTimeout,          ///< a deadline passed
  kPeerLost,         ///< a peer disconnected or died
  kAuthFailed,       ///< wrong job secret, job id or protocol version
  kProtocolError,    ///< malformed or unexpected bytes on a connection
  kNotFound,         ///< a key or file does not exist
  kMismatch,         ///< ranks disagree on a collective's parameters
  kIoError,          ///< a system call failed
  kAborted,          ///< the operation was cancelled because the job is ending
  kInternal,         ///< a bug in hoop
};

/// Name of a status code ("timeout", "peer lost", ...).
std::string_view status_code_name(StatusCode code);

/// Outcome of an operation: ok, or a code with a message naming the cause.
class [[nodiscard]] Status {
 public:
  /// Success.
  Status() = default;
  /// A status with `code` and `message` (a failure's cause).
  Status(StatusCode code, std::string message);

  /// The success value.
  static Status success() { return Status(); }

  /// Whether this is success.
  bool ok() const { return code_ == StatusCode::kOk; }
  /// What went wrong (kOk: nothing).
  StatusCode code() const { return code_; }
  /// The message naming the cause (empty for success()).
  const std::string& message() const;
  /// "timeout: rank 3 did not answer within 10 s", or "ok".
  std::string to_string() const;
  /// The same status with `context + ": "` put before its message (no-op when ok).
  Status with_context(std::string_view context) const;

 private:
  // A success is a code and a null pointer: building, copying and destroying one (every call
  // does dozens) costs a few instructions, where an inline std::string cost a few dozen. A
  // failure's message is immutable, so copies share it.
  StatusCode code_ = StatusCode::kOk;
  std::shared_ptr<const std::string> message_;
};

// Convenience constructors, one per failure code.

/// A kInvalidArgument status with `message`.
Status invalid_argument(std::string message);
/// A kTimeout status with `message`.
Status timeout_error(std::string message);
/// A kPeerLost status with `message`.
Status peer_lost(std::string message);
/// A kAuthFailed status with `message`.
Status auth_failed(std::string message);
/// A kProtocolError status with `message`.
Status protocol_error(std::string message);
/// A kNotFound status with `message`.
Status not_found(std::string message);
/// A kMismatch status with `message`.
Status mismatch_error(std::string message);
/// A kIoError status with `message`.
Status io_error(std::string message);
/// A kAborted status with `message`.
Status aborted(std::string message);
/// A kInternal status with `message`.
Status internal_error(std::string message);
/// io_error whose message ends with strerror(errnum).
Status errno_error(std::string_view what, int errnum);

/// The exception thrown at the public C++ API boundary; carries the Status.
class Error : public std::runtime_error {
 public:
  /// An exception carrying `status`; what() is its to_string().
  explicit Error(Status status);
  /// The status it carries.
  const Status& status() const { return status_; }

 private:
  Status status_;
};

/// A value of type T, or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  /// A result holding `value`.
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// A failed result; an ok `status` becomes a kInternal error, since it explains nothing.
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok())
      v_ = Status(StatusCode::kInternal, "Result built from ok Status");
  }

  /// Whether a value is held.
  bool ok() const { return std::holds_alternative<T>(v_); }
  /// Ok when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  /// The value; throws hoop::Error when there is none.
  T& value() & {
    throw_if_error();
    return std::get<T>(v_);
  }
  /// The value; throws hoop::Error when there is none.
  const T& value() const& {
    throw_if_error();
    return std::get<T>(v_);
  }
  /// The value, moved out; throws hoop::Error when there is none.
  T&& value() && {
    throw_if_error();
    return std::get<T>(std::move(v_));
  }
  /// The value, as value() returns it.
  T& operator*() & { return value(); }
  /// The value, as value() returns it.
  const T& operator*() const& { return value(); }
  /// A pointer to the value, as value() returns it.
  T* operator->() { return &value(); }
  /// A pointer to the value, as value() returns it.
  const T* operator->() const { return &value(); }

 private:
  void throw_if_error() const {
    if (!ok()) throw Error(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

/// Throws hoop::Error when `status` is not ok.
void throw_if_error(const Status& status);

/// The value of the HOOP_* configuration variable `name` as hoop itself reads it (so that code
/// built on hoop follows the same settings): from the environment under `name` or its Horovod
/// alias, else the declared default, checked against the variable's type and range and
/// returned as text (an enum's choice lower-cased). invalid_argument naming the variable when
/// it is not one of hoop's (see `hooprun --env-table`) or its value is malformed; not_found
/// when it is unset and has no default.
Result<std::string> config_value(std::string_view name);
/// The declared default of the HOOP_* variable `name`, whatever the environment says (for
/// callers that treat an empty value as unset); invalid_argument when `name` is not one of
/// hoop's, not_found when it has no default.
Result<std::string> config_default(std::string_view name);

}  // namespace hoop

/// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define HOOP_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::hoop::Status hoop_status_ = (expr);        \
    if (!hoop_status_.ok()) return hoop_status_; \
  } while (0)

#define HOOP_CONCAT_INNER_(a, b) a##b
#define HOOP_CONCAT_(a, b) HOOP_CONCAT_INNER_(a, b)
/// Declares `lhs` from a Result expression, or returns its Status from the enclosing function.
#define HOOP_ASSIGN_OR_RETURN(lhs, expr) \
  HOOP_ASSIGN_OR_RETURN_IMPL_(HOOP_CONCAT_(hoop_result_, __LINE__), lhs, expr)
#define HOOP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
