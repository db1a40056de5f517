// The C ABI's shared part: version, last error, names, and the enum conversions whose values
// the static_asserts pin to the C++ ones.
#include <new>
#include <stdexcept>
#include <string>

#include "c_abi.h"
#include "hoop/version.h"

namespace hoop::c_abi {
namespace {

static_assert(HOOP_OK == static_cast<int>(StatusCode::kOk));
static_assert(HOOP_ERR_INVALID_ARGUMENT == static_cast<int>(StatusCode::kInvalidArgument));
static_assert(HOOP_ERR_TIMEOUT == static_cast<int>(StatusCode::kTimeout));
static_assert(HOOP_ERR_PEER_LOST == static_cast<int>(StatusCode::kPeerLost));
static_assert(HOOP_ERR_AUTH_FAILED == static_cast<int>(StatusCode::kAuthFailed));
static_assert(HOOP_ERR_PROTOCOL == static_cast<int>(StatusCode::kProtocolError));
static_assert(HOOP_ERR_NOT_FOUND == static_cast<int>(StatusCode::kNotFound));
static_assert(HOOP_ERR_MISMATCH == static_cast<int>(StatusCode::kMismatch));
static_assert(HOOP_ERR_IO == static_cast<int>(StatusCode::kIoError));
static_assert(HOOP_ERR_ABORTED == static_cast<int>(StatusCode::kAborted));
static_assert(HOOP_ERR_INTERNAL == static_cast<int>(StatusCode::kInternal));

static_assert(HOOP_U8 == static_cast<int>(DataType::kU8));
static_assert(HOOP_I8 == static_cast<int>(DataType::kI8));
static_assert(HOOP_I32 == static_cast<int>(DataType::kI32));
static_assert(HOOP_I64 == static_cast<int>(DataType::kI64));
static_assert(HOOP_F16 == static_cast<int>(DataType::kF16));
static_assert(HOOP_BF16 == static_cast<int>(DataType::kBF16));
static_assert(HOOP_F32 == static_cast<int>(DataType::kF32));
static_assert(HOOP_F64 == static_cast<int>(DataType::kF64));
static_assert(HOOP_I16 == static_cast<int>(DataType::kI16));

static_assert(HOOP_SUM == static_cast<int>(ReduceOp::kSum));
static_assert(HOOP_AVG == static_cast<int>(ReduceOp::kAvg));
static_assert(HOOP_MIN == static_cast<int>(ReduceOp::kMin));
static_assert(HOOP_MAX == static_cast<int>(ReduceOp::kMax));
static_assert(HOOP_PROD == static_cast<int>(ReduceOp::kProd));
static_assert(HOOP_ADASUM == static_cast<int>(ReduceOp::kAdasum));

// Per thread, so that two threads' failures do not overwrite each other's message.
thread_local std::string t_last_error;

}  // namespace

hoop_status_t report(const Status& status) {
  if (!status.ok()) {
    try {
      t_last_error = status.message();
    } catch (const std::bad_alloc&) {
      t_last_error.clear();  // the code still says what went wrong
    }
  }
  return static_cast<hoop_status_t>(status.code());
}

Status current_exception_status() {
  try {
    throw;
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return internal_error("out of memory");
  } catch (const std::exception& e) {
    return internal_error(e.what());
  } catch (...) {
    return internal_error("an unknown exception reached the C boundary");
  }
}

Status check_not_null(const void* pointer, std::string_view what) {
  if (pointer == nullptr) return invalid_argument(std::string(what) + ": null pointer");
  return Status::success();
}

Result<DataType> dtype_of(const hoop_dtype_t& dtype) {
  const long long value = raw_enum(dtype);
  if (value < 0 || value > static_cast<int>(DataType::kI16))
    return invalid_argument("dtype: unknown data type " + std::to_string(value));
  return static_cast<DataType>(value);
}

Result<ReduceOp> op_of(const hoop_reduce_op_t& op) {
  const long long value = raw_enum(op);
  if (value < 0 || value > static_cast<int>(ReduceOp::kAdasum))
    return invalid_argument("op: unknown reduce op " + std::to_string(value));
  return static_cast<ReduceOp>(value);
}

}  // namespace hoop::c_abi

using hoop::c_abi::dtype_of;

extern "C" {

// A string literal behind the view: null-terminated.
const char* hoop_version(void) { return hoop::version().data(); }

const char* hoop_last_error(void) { return hoop::c_abi::t_last_error.c_str(); }

const char* hoop_status_name(hoop_status_t status) {
  const int value = static_cast<int>(status);
  if (value < 0 || value > static_cast<int>(hoop::StatusCode::kInternal)) return "unknown status";
  // status_code_name's views point at string literals, so data() is NUL-terminated.
  return hoop::status_code_name(static_cast<hoop::StatusCode>(value)).data();
}

size_t hoop_dtype_size(hoop_dtype_t dtype) {
  const auto parsed = dtype_of(dtype);
  return parsed.ok() ? hoop::dtype_size(*parsed) : 0;
}

}  // extern "C"
