// hoop._hoop: the runtime (include/hoop/hoop.h) for Python, as plain functions over data
// pointers, dtype names and shapes. It never sees a torch type, so one build serves every
// torch version: hoop.torch (adapters/torch/python) turns tensors into (pointer, dtype, shape)
// and keeps them alive until their handle is released.
//
// Handles are small integers into a table of hoop::Handle; wait() releases the GIL so the
// runtime's thread and other Python threads keep going while a rank blocks.
//
// Tensors carry a device: -1 for host memory, else the CUDA device ordinal. It needs nothing
// but hoop.h and pybind11, so that it can be compiled on its own for another interpreter
// (scripts/gpu-check does so on a GPU machine whose Python differs from Debian's).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "adapters/torch/comm_binding.h"
#include "hoop/elastic.h"
#include "hoop/hoop.h"

namespace py = pybind11;

namespace {

// The Python exception types; created once at import. Misuse (invalid_argument: a name
// submitted twice while pending, rows that do not split, a scalar to scatter) raises
// HoopValueError, both a HoopError and a ValueError, since Horovod raises ValueError there and
// code catches it by that type.
PyObject* g_hoop_error = nullptr;
PyObject* g_hoop_value_error = nullptr;

}  // namespace

namespace hoop::python {

[[noreturn]] void raise(const hoop::Status& status) {
  PyObject* kind =
      status.code() == hoop::StatusCode::kInvalidArgument ? g_hoop_value_error : g_hoop_error;
  py::object type = py::reinterpret_borrow<py::object>(kind);
  py::object error = type(status.to_string());
  error.attr("code") = std::string(hoop::status_code_name(status.code()));
  error.attr("message") = status.message();
  // hoop.torch.elastic.run resets the job on these and re-raises the others.
  error.attr("recoverable") = hoop::elastic::recoverable(status);
  PyErr_SetObject(kind, error.ptr());
  throw py::error_already_set();
}

hoop::DataType dtype_of(const std::string& name) {
  const auto dtype = hoop::parse_dtype(name);
  if (!dtype) raise(hoop::invalid_argument("unknown dtype '" + name + "'"));
  return *dtype;
}

hoop::ReduceOp op_of(const std::string& name) {
  const auto op = hoop::parse_op(name);
  if (!op) raise(hoop::invalid_argument("unknown reduce op '" + name + "'"));
  return *op;
}

}  // namespace hoop::python

namespace {

using hoop::python::dtype_of;
using hoop::python::op_of;
using hoop::python::raise;
using Shape = std::vector<std::int64_t>;

hoop::Tensor tensor_of(std::uintptr_t ptr, const std::string& dtype, const Shape& shape,
                       int device) {
  return hoop::Tensor{reinterpret_cast<void*>(ptr), dtype_of(dtype), shape, device};
}

hoop::ReduceOptions reduce_options(const std::string& op, double prescale, double postscale,
                                   int process_set) {
  hoop::ReduceOptions o;
  o.op = op_of(op);
  o.prescale = prescale;
  o.postscale = postscale;
  o.process_set = process_set;
  return o;
}

class HandleTable {
 public:
  std::int64_t add(hoop::Handle handle) {
    std::lock_guard lock(mu_);
    handles_.emplace(next_, std::move(handle));
    return next_++;
  }
  hoop::Handle get(std::int64_t id) {
    std::lock_guard lock(mu_);
    const auto it = handles_.find(id);
    if (it == handles_.end())
      raise(hoop::invalid_argument("unknown or released handle " + std::to_string(id)));
    return it->second;
  }
  void release(std::int64_t id) {
    std::lock_guard lock(mu_);
    handles_.erase(id);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::int64_t, hoop::Handle> handles_;
  std::int64_t next_ = 1;
};

HandleTable& handles() {
  static HandleTable table;
  return table;
}

// Runs f, turning hoop::Error into the Python exception with its cause.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const hoop::Error& e) {
    raise(e.status());
  }
}

// A finished handle's outcome; the GIL is released while it blocks.
void wait_handle(std::int64_t id) {
  const hoop::Handle h = handles().get(id);
  hoop::Status status;
  {
    py::gil_scoped_release release;
    status = h.status();
  }
  if (!status.ok()) raise(status);
}

void define_collectives(py::module_& m) {
  m.def(
      "allreduce_async",
      [](const std::string& name, std::uintptr_t in, std::uintptr_t out, const std::string& dtype,
         const Shape& shape, const std::string& op, double prescale, double postscale,
         int process_set, int device) {
        return guarded([&] {
          return handles().add(hoop::allreduce_async(
              name, tensor_of(in, dtype, shape, device), tensor_of(out, dtype, shape, device),
              reduce_options(op, prescale, postscale, process_set)));
        });
      },
      "Starts an allreduce of the tensor at in_ptr into out_ptr (may be the same).");
  m.def(
      "grouped_allreduce_async",
      [](const std::vector<std::string>& names, const std::vector<std::uintptr_t>& ins,
         const std::vector<std::uintptr_t>& outs, const std::vector<std::string>& dtypes,
         const std::vector<Shape>& shapes, const std::string& op, double prescale,
         double postscale, int process_set, int device) {
        const std::size_t n = names.size();
        if (ins.size() != n || outs.size() != n || dtypes.size() != n || shapes.size() != n)
          raise(hoop::invalid_argument("grouped_allreduce: names, inputs, outputs, dtypes and "
                                       "shapes must have the same length"));
        std::vector<hoop::Tensor> inputs, outputs;
        for (std::size_t i = 0; i < n; ++i) {
          inputs.push_back(tensor_of(ins[i], dtypes[i], shapes[i], device));
          outputs.push_back(tensor_of(outs[i], dtypes[i], shapes[i], device));
        }
        return guarded([&] {
          return handles().add(hoop::grouped_allreduce_async(
              names, inputs, outputs, reduce_options(op, prescale, postscale, process_set)));
        });
      },
      "Starts one allreduce of several tensors, negotiated and fused together.");
  m.def(
      "allgather_async",
      [](const std::string& name, std::uintptr_t ptr, const std::string& dtype,
         const Shape& shape, int process_set, int device) {
        return guarded([&] {
          return handles().add(
              hoop::allgather_async(name, tensor_of(ptr, dtype, shape, device), process_set));
        });
      },
      "Starts an allgather along the first dimension; the result comes from copy_output.");
  m.def(
      "broadcast_async",
      [](const std::string& name, std::uintptr_t ptr, const std::string& dtype,
         const Shape& shape, int root, int process_set, int device) {
        return guarded([&] {
          return handles().add(hoop::broadcast_async(name, tensor_of(ptr, dtype, shape, device),
                                                     root, process_set));
        });
      },
      "Starts a broadcast from root into the tensor on every other rank (in place).");
  m.def(
      "alltoall_async",
      [](const std::string& name, std::uintptr_t ptr, const std::string& dtype,
         const Shape& shape, const std::vector<std::int64_t>& splits, int process_set,
         int device) {
        return guarded([&] {
          return handles().add(hoop::alltoall_async(name, tensor_of(ptr, dtype, shape, device),
                                                    splits, process_set));
        });
      },
      "Starts an alltoall of first-dimension rows (splits per rank; empty: even).");
  m.def(
      "reducescatter_async",
      [](const std::string& name, std::uintptr_t ptr, const std::string& dtype,
         const Shape& shape, const std::string& op, double prescale, double postscale,
         int process_set, int device) {
        return guarded([&] {
          return handles().add(hoop::reducescatter_async(
              name, tensor_of(ptr, dtype, shape, device),
              reduce_options(op, prescale, postscale, process_set)));
        });
      },
      "Starts a reduce-scatter; this rank's rows come from copy_output.");
  m.def(
      "join_async",
      [](int process_set) {
        return guarded([&] { return handles().add(hoop::join_async(process_set)); });
      },
      "Declares that this rank has no more tensors this step.");
  m.def(
      "barrier",
      [](int process_set) {
        guarded([&] {
          py::gil_scoped_release release;
          hoop::barrier(process_set);
        });
      },
      "Returns once every rank of the set has reached it.");
}

void define_handles(py::module_& m) {
  m.def(
      "poll", [](std::int64_t id) { return handles().get(id).poll(); },
      "True once the operation has finished, successfully or not.");
  m.def("wait", &wait_handle,
        "Blocks (without the GIL) until the operation finishes; raises HoopError if it failed.");
  m.def(
      "output_shape",
      [](std::int64_t id) {
        return guarded([&] { return handles().get(id).output().shape; });
      },
      "The shape of an allgather, alltoall or reducescatter result (after wait).");
  m.def(
      "copy_output",
      [](std::int64_t id, std::uintptr_t dst) {
        guarded([&] {
          const hoop::Handle h = handles().get(id);
          py::gil_scoped_release release;
          h.output().copy_to(reinterpret_cast<void*>(dst));
        });
      },
      "Copies the result into dst, which must hold product(output_shape) elements in the "
      "memory the inputs were in (host, or the same CUDA device).");
  m.def(
      "received_splits",
      [](std::int64_t id) {
        return guarded([&] { return handles().get(id).received_splits(); });
      },
      "Alltoall: the rows received from each rank.");
  m.def(
      "last_joined_rank",
      [](std::int64_t id) { return guarded([&] { return handles().get(id).last_joined_rank(); }); },
      "join: the rank that joined last.");
  m.def(
      "release", [](std::int64_t id) { handles().release(id); },
      "Forgets a handle (after its result has been taken).");
}

void define_job(py::module_& m) {
  m.def(
      "init", [] { guarded([] { hoop::init(); }); },
      "Joins the job the launcher described and starts the runtime.");
  m.def(
      "shutdown",
      [] {
        guarded([] {
          py::gil_scoped_release release;
          hoop::shutdown();
        });
      },
      "Finishes the work in flight and stops the runtime.");
  m.def("is_initialized", &hoop::is_initialized, "Whether init() succeeded and shutdown() has not run.");
  m.def("cuda_built", &hoop::cuda_built, "Whether this build takes CUDA tensors.");
  m.def("nccl_built", &hoop::nccl_version_code,
        "NCCL_VERSION_CODE of the NCCL device backend this build has, 0 without one (as Horovod).");
  m.def("mpi_built", &hoop::mpi_built, "Whether this build has the MPI transport.");
  m.def("rank", [] { return guarded(hoop::rank); });
  m.def("size", [] { return guarded(hoop::size); });
  m.def("local_rank", [] { return guarded(hoop::local_rank); });
  m.def("local_size", [] { return guarded(hoop::local_size); });
  m.def("cross_rank", [] { return guarded(hoop::cross_rank); });
  m.def("cross_size", [] { return guarded(hoop::cross_size); });
  m.def(
      "add_process_set",
      [](const std::vector<int>& ranks) {
        return guarded([&] {
          py::gil_scoped_release release;
          return hoop::add_process_set(ranks);
        });
      },
      "Creates a process set of these global ranks (every rank calls it).");
  m.def(
      "remove_process_set",
      [](int id) {
        guarded([&] {
          py::gil_scoped_release release;
          hoop::remove_process_set(id);
        });
      },
      "Removes a process set (every rank calls it).");
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        guarded([&] { hoop::start_timeline(path, mark_cycles); });
      },
      py::arg("path"), py::arg("mark_cycles") = false,
      "Starts writing the timeline to path (rank 0, or every rank where path has %r).");
  m.def("stop_timeline", [] { guarded(hoop::stop_timeline); }, "Stops writing the timeline.");
  m.def("elastic_enabled", &hoop::elastic::enabled,
        "Whether this process is a worker of an elastic job (hooprun set HOOP_ELASTIC_ID).");
  m.def("elastic_round", &hoop::elastic::round,
        "The elastic round this process is in (-1 outside an elastic job).");
  m.def(
      "elastic_report_failure",
      [](const std::string& code, const std::string& message) {
        // The HoopError's .code and .message give back the Status it was raised for.
        auto c = hoop::StatusCode::kAborted;
        for (int i = 0; i <= static_cast<int>(hoop::StatusCode::kInternal); ++i) {
          if (hoop::status_code_name(static_cast<hoop::StatusCode>(i)) == code)
            c = static_cast<hoop::StatusCode>(i);
        }
        py::gil_scoped_release release;
        hoop::elastic::report_failure(hoop::Status(c, message));
      },
      py::arg("code"), py::arg("message"),
      "Tells the job's driver that this worker's round failed with a HoopError's code and "
      "message (before a reset).");
  m.def(
      "elastic_hosts_updated",
      [] {
        return guarded([] {
          py::gil_scoped_release release;
          return hoop::elastic::hosts_updated();
        });
      },
      "Whether hooprun published a newer round (a collective: every rank calls it).");
  m.def("process_set_ranks", [](int id) { return guarded([&] { return hoop::process_set_ranks(id); }); });
  m.def("process_set_rank", [](int id) { return guarded([&] { return hoop::process_set_rank(id); }); });
}

}  // namespace

PYBIND11_MODULE(_hoop, m) {
  m.doc() = "hoop's runtime over data pointers (used by hoop.torch)";
  g_hoop_error = PyErr_NewExceptionWithDoc(
      "hoop._hoop.HoopError",
      "A hoop operation failed; .code names the kind, .message the cause (rank, tensor, field).",
      PyExc_RuntimeError, nullptr);
  m.attr("HoopError") = py::handle(g_hoop_error);
  py::tuple bases = py::make_tuple(py::handle(g_hoop_error), py::handle(PyExc_ValueError));
  g_hoop_value_error = PyErr_NewExceptionWithDoc(
      "hoop._hoop.HoopValueError",
      "A call hoop refused as misuse (code invalid_argument): a HoopError and a ValueError.",
      bases.ptr(), nullptr);
  m.attr("HoopValueError") = py::handle(g_hoop_value_error);
  define_job(m);
  define_collectives(m);
  define_handles(m);
  hoop::python::define_communicator(m);
  hoop::python::define_elastic_driver(m);
}
