// The runtime (hoop.h) behind hoop_init, the named-tensor collectives and hoop_handle_t. Every
// call here can throw hoop::Error (misuse, a failed or missing runtime); the guards turn that
// into a status. A handle remembers which call made it, so that asking an allreduce for a
// gathered result is an error naming both rather than an empty tensor.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "c_abi.h"
#include "hoop/hoop.h"

struct hoop_handle {
  hoop::Handle handle;
  std::string_view call;  // "allreduce", "allgather", ...: a literal
};

namespace hoop::c_abi {
namespace {

Result<Tensor> tensor_of(const hoop_tensor_t* tensor, std::string_view what) {
  HOOP_RETURN_IF_ERROR(check_not_null(tensor, what));
  const std::string name(what);
  if (tensor->ndim < 0)
    return invalid_argument(name + ".ndim: " + std::to_string(tensor->ndim) + " is negative");
  if (tensor->ndim > 0 && tensor->shape == nullptr)
    return invalid_argument(name + ".shape: null for " + std::to_string(tensor->ndim) +
                            " dimensions");
  Tensor out;
  out.data = tensor->data;
  HOOP_ASSIGN_OR_RETURN(out.dtype, dtype_of(tensor->dtype));
  out.shape.assign(tensor->shape, tensor->shape + tensor->ndim);
  out.device = tensor->device;
  return out;
}

Result<ReduceOptions> reduce_options_of(const hoop_reduce_options_t* options) {
  ReduceOptions out;
  if (options == nullptr) return out;
  HOOP_ASSIGN_OR_RETURN(out.op, op_of(options->op));
  out.prescale = options->prescale;
  out.postscale = options->postscale;
  out.process_set = options->process_set;
  return out;
}

Status check_name(const char* name) { return check_not_null(name, "name"); }

// Runs `start()` (returning hoop::Handle) at the boundary and hands a new hoop_handle_t out.
template <typename F>
hoop_status_t start_async(hoop_handle_t** handle, std::string_view call, F&& start) noexcept {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(handle, "handle"));
    *handle = nullptr;
    *handle = new hoop_handle{start(), call};
    return Status::success();
  });
}

// Runs an async call `start(&handle)` and waits for it. On success the finished handle goes to
// *result, or is released when result is null (calls without a result); on failure it is
// released and *result stays null.
template <typename F>
hoop_status_t run_blocking(hoop_handle_t** result, F&& start) noexcept {
  if (result != nullptr) *result = nullptr;
  hoop_handle_t* handle = nullptr;
  hoop_status_t outcome = start(&handle);
  if (outcome == HOOP_OK) outcome = hoop_wait(handle);
  if (outcome != HOOP_OK || result == nullptr) {
    hoop_handle_release(handle);
  } else {
    *result = handle;
  }
  return outcome;
}

// run_blocking for the calls whose result the caller must receive.
template <typename F>
hoop_status_t run_blocking_with_result(hoop_handle_t** result, F&& start) noexcept {
  const hoop_status_t checked = guard([&] { return check_not_null(result, "result"); });
  if (checked != HOOP_OK) return checked;
  return run_blocking(result, start);
}

// The handle's state once it has finished successfully, for the result accessors.
Status check_finished(const hoop_handle_t* handle, std::string_view wanted) {
  HOOP_RETURN_IF_ERROR(check_not_null(handle, "handle"));
  if (!handle->handle.poll())
    return invalid_argument("handle: the " + std::string(handle->call) +
                            " has not finished (hoop_wait or hoop_poll first)");
  HOOP_RETURN_IF_ERROR(handle->handle.status());
  if (wanted.find(handle->call) == std::string_view::npos)
    return invalid_argument("handle: the " + std::string(handle->call) +
                            " has no such result (only " + std::string(wanted) + " have one)");
  return Status::success();
}

constexpr std::string_view kResultCalls = "allgather, alltoall and reducescatter";

}  // namespace
}  // namespace hoop::c_abi

using hoop::Status;
using hoop::c_abi::check_name;
using hoop::c_abi::check_not_null;
using hoop::c_abi::guard;
using hoop::c_abi::guard_int;
using hoop::c_abi::reduce_options_of;
using hoop::c_abi::run_blocking;
using hoop::c_abi::run_blocking_with_result;
using hoop::c_abi::start_async;
using hoop::c_abi::tensor_of;

extern "C" {

hoop_status_t hoop_init(void) {
  return guard([] {
    hoop::init();
    return Status::success();
  });
}

hoop_status_t hoop_shutdown(void) {
  return guard([] {
    hoop::shutdown();
    return Status::success();
  });
}

int hoop_is_initialized(void) {
  return guard_int([] { return hoop::is_initialized() ? 1 : 0; });
}

int hoop_rank(void) { return guard_int(hoop::rank); }
int hoop_size(void) { return guard_int(hoop::size); }
int hoop_local_rank(void) { return guard_int(hoop::local_rank); }
int hoop_local_size(void) { return guard_int(hoop::local_size); }
int hoop_cross_rank(void) { return guard_int(hoop::cross_rank); }
int hoop_cross_size(void) { return guard_int(hoop::cross_size); }

hoop_status_t hoop_allreduce_async(const char* name, const hoop_tensor_t* input,
                                   const hoop_tensor_t* output,
                                   const hoop_reduce_options_t* options, hoop_handle_t** handle) {
  return start_async(handle, "allreduce", [&] {
    hoop::throw_if_error(check_name(name));
    return hoop::allreduce_async(name, tensor_of(input, "input").value(),
                                 tensor_of(output, "output").value(),
                                 reduce_options_of(options).value());
  });
}

hoop_status_t hoop_allgather_async(const char* name, const hoop_tensor_t* input, int process_set,
                                   hoop_handle_t** handle) {
  return start_async(handle, "allgather", [&] {
    hoop::throw_if_error(check_name(name));
    return hoop::allgather_async(name, tensor_of(input, "input").value(), process_set);
  });
}

hoop_status_t hoop_broadcast_async(const char* name, const hoop_tensor_t* tensor, int root,
                                   int process_set, hoop_handle_t** handle) {
  return start_async(handle, "broadcast", [&] {
    hoop::throw_if_error(check_name(name));
    return hoop::broadcast_async(name, tensor_of(tensor, "tensor").value(), root, process_set);
  });
}

hoop_status_t hoop_alltoall_async(const char* name, const hoop_tensor_t* input,
                                  const int64_t* splits, size_t num_splits, int process_set,
                                  hoop_handle_t** handle) {
  return start_async(handle, "alltoall", [&] {
    hoop::throw_if_error(check_name(name));
    if (num_splits > 0) hoop::throw_if_error(check_not_null(splits, "splits"));
    const std::vector<std::int64_t> split_list(splits, splits + num_splits);
    return hoop::alltoall_async(name, tensor_of(input, "input").value(), split_list, process_set);
  });
}

hoop_status_t hoop_reducescatter_async(const char* name, const hoop_tensor_t* input,
                                       const hoop_reduce_options_t* options,
                                       hoop_handle_t** handle) {
  return start_async(handle, "reducescatter", [&] {
    hoop::throw_if_error(check_name(name));
    return hoop::reducescatter_async(name, tensor_of(input, "input").value(),
                                     reduce_options_of(options).value());
  });
}

hoop_status_t hoop_join_async(int process_set, hoop_handle_t** handle) {
  return start_async(handle, "join", [&] { return hoop::join_async(process_set); });
}

hoop_status_t hoop_allreduce(const char* name, const hoop_tensor_t* input,
                             const hoop_tensor_t* output, const hoop_reduce_options_t* options) {
  return run_blocking(nullptr, [&](hoop_handle_t** h) {
    return hoop_allreduce_async(name, input, output, options, h);
  });
}

hoop_status_t hoop_allgather(const char* name, const hoop_tensor_t* input, int process_set,
                             hoop_handle_t** result) {
  return run_blocking_with_result(
      result, [&](hoop_handle_t** h) { return hoop_allgather_async(name, input, process_set, h); });
}

hoop_status_t hoop_broadcast(const char* name, const hoop_tensor_t* tensor, int root,
                             int process_set) {
  return run_blocking(nullptr, [&](hoop_handle_t** h) {
    return hoop_broadcast_async(name, tensor, root, process_set, h);
  });
}

hoop_status_t hoop_alltoall(const char* name, const hoop_tensor_t* input, const int64_t* splits,
                            size_t num_splits, int process_set, hoop_handle_t** result) {
  return run_blocking_with_result(result, [&](hoop_handle_t** h) {
    return hoop_alltoall_async(name, input, splits, num_splits, process_set, h);
  });
}

hoop_status_t hoop_reducescatter(const char* name, const hoop_tensor_t* input,
                                 const hoop_reduce_options_t* options, hoop_handle_t** result) {
  return run_blocking_with_result(
      result, [&](hoop_handle_t** h) { return hoop_reducescatter_async(name, input, options, h); });
}

hoop_status_t hoop_barrier(int process_set) {
  return guard([&] {
    hoop::barrier(process_set);
    return Status::success();
  });
}

hoop_status_t hoop_join(int process_set, int* last_rank) {
  hoop_handle_t* h = nullptr;
  hoop_status_t s = hoop_join_async(process_set, &h);
  if (s == HOOP_OK) s = hoop_wait(h);
  if (s == HOOP_OK && last_rank != nullptr) s = hoop_handle_last_joined_rank(h, last_rank);
  hoop_handle_release(h);
  return s;
}

int hoop_poll(const hoop_handle_t* handle) {
  return guard_int([&] {
    hoop::throw_if_error(check_not_null(handle, "handle"));
    return handle->handle.poll() ? 1 : 0;
  });
}

hoop_status_t hoop_wait(const hoop_handle_t* handle) {
  return guard([&] {
    HOOP_RETURN_IF_ERROR(check_not_null(handle, "handle"));
    return handle->handle.status();
  });
}

hoop_status_t hoop_handle_output(const hoop_handle_t* handle, hoop_output_t* output) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(output, "output"));
    std::memset(output, 0, sizeof(*output));
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_finished(handle, hoop::c_abi::kResultCalls));
    hoop::OwnedTensor& t = handle->handle.output();
    output->data = t.data();
    output->dtype = static_cast<hoop_dtype_t>(t.dtype);
    output->shape = t.shape.data();
    output->ndim = static_cast<int>(t.shape.size());
    output->count = t.view().count();
    output->bytes = t.view().bytes();
    output->device = t.device;
    return Status::success();
  });
}

hoop_status_t hoop_handle_copy_output(const hoop_handle_t* handle, void* dst) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_finished(handle, hoop::c_abi::kResultCalls));
    hoop::OwnedTensor& t = handle->handle.output();
    if (t.view().bytes() > 0) HOOP_RETURN_IF_ERROR(check_not_null(dst, "dst"));
    t.copy_to(dst);
    return Status::success();
  });
}

hoop_status_t hoop_handle_received_splits(const hoop_handle_t* handle, const int64_t** splits,
                                          size_t* count) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(splits, "splits"));
    HOOP_RETURN_IF_ERROR(check_not_null(count, "count"));
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_finished(handle, "alltoall"));
    const std::vector<std::int64_t>& got = handle->handle.received_splits();
    *splits = got.data();
    *count = got.size();
    return Status::success();
  });
}

hoop_status_t hoop_handle_last_joined_rank(const hoop_handle_t* handle, int* rank) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(rank, "rank"));
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_finished(handle, "join"));
    *rank = handle->handle.last_joined_rank();
    return Status::success();
  });
}

void hoop_handle_release(hoop_handle_t* handle) { delete handle; }

hoop_status_t hoop_add_process_set(const int* ranks, size_t count, int* process_set) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(process_set, "process_set"));
    if (count > 0) HOOP_RETURN_IF_ERROR(check_not_null(ranks, "ranks"));
    *process_set = hoop::add_process_set(std::vector<int>(ranks, ranks + count));
    return Status::success();
  });
}

hoop_status_t hoop_remove_process_set(int process_set) {
  return guard([&] {
    hoop::remove_process_set(process_set);
    return Status::success();
  });
}

hoop_status_t hoop_process_set_ranks(int process_set, int* ranks, size_t capacity, size_t* count) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(count, "count"));
    if (capacity > 0) HOOP_RETURN_IF_ERROR(check_not_null(ranks, "ranks"));
    const std::vector<int> members = hoop::process_set_ranks(process_set);
    *count = members.size();
    for (std::size_t i = 0; i < members.size() && i < capacity; ++i) ranks[i] = members[i];
    return Status::success();
  });
}

hoop_status_t hoop_process_set_rank(int process_set, int* rank) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(rank, "rank"));
    *rank = hoop::process_set_rank(process_set);
    return Status::success();
  });
}

}  // extern "C"
