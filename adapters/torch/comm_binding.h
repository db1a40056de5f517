// What binding.cc (the runtime's half of hoop._hoop), comm_binding.cc (the Communicator's) and
// elastic_binding.cc (an elastic driver's) share.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "hoop/core.h"

namespace hoop::python {

/// Raises the Python exception for `status` (HoopError, or HoopValueError for misuse), with
/// .code, .message and .recoverable set.
[[noreturn]] void raise(const Status& status);
/// The dtype named `name` ("f32", "i64", ...); raises HoopValueError for an unknown name.
DataType dtype_of(const std::string& name);
/// The reduce op named `name` ("sum", "max", ...); raises HoopValueError for an unknown name.
ReduceOp op_of(const std::string& name);

/// Adds StoreHost and Comm (the Communicator with its non-blocking collectives) to `m`.
void define_communicator(pybind11::module_& m);
/// Adds ElasticRounds (an elastic job's rounds in its store, for a Python driver) to `m`.
void define_elastic_driver(pybind11::module_& m);

}  // namespace hoop::python
