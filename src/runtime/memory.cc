#include "runtime/memory.h"

#include <cstring>

#include "core/reduce.h"
#include "core/scale.h"

namespace hoop::runtime {

Status Memory::scale_copy(void* dst, const void* src, std::size_t count, DataType dtype,
                          double factor) const {
  if (!on_device()) return hoop::scale_copy(dst, src, count, dtype, factor);
  // In two steps, which compute what the host's one loop does: the device kernel scales in
  // place, and a factor of 1 leaves the bytes as they are on both.
  if (dst != src) HOOP_RETURN_IF_ERROR(device::copy(dst, src, count * dtype_size(dtype), stream_));
  // A factor of 1 is no scaling: integer tensors (whose factors are always 1) reach this with
  // every reduction, and device::scale refuses integer dtypes.
  if (factor == 1.0) return Status::success();
  return device::scale(dst, count, dtype, factor, stream_);
}

Status Memory::copy(void* dst, const void* src, std::size_t bytes) const {
  if (on_device()) return device::copy(dst, src, bytes, stream_);
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
  return Status::success();
}

Status Memory::zero(void* dst, std::size_t bytes) const {
  if (on_device()) return device::zero(dst, bytes, stream_);
  if (bytes > 0) std::memset(dst, 0, bytes);
  return Status::success();
}

Status Memory::divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor) const {
  if (on_device()) return device::divide(buf, count, dtype, divisor, stream_);
  return hoop::divide(buf, count, dtype, divisor);
}

Status Memory::sync(Deadline deadline) const {
  return on_device() ? device::synchronize(stream_, deadline) : Status::success();
}

Status Memory::allocate(OwnedTensor& out, std::size_t bytes) const {
  out.device = device_;
  if (!on_device()) {
    out.storage.resize(bytes);
    return Status::success();
  }
  HOOP_ASSIGN_OR_RETURN(device::Buffer b, device::Buffer::allocate(device_, bytes));
  // The tensor shares ownership of the allocation, which cudaFree releases with the last copy.
  auto owner = std::make_shared<device::Buffer>(std::move(b));
  out.device_storage = std::shared_ptr<std::byte>(owner, owner->data());
  return Status::success();
}

Result<std::byte*> Workspace::get(const Memory& memory, std::size_t bytes) {
  if (!memory.on_device()) {
    if (host_.size() < bytes) host_.resize(bytes);
    return host_.data();
  }
  if (device_.device() != memory.device() || device_.size() < bytes)
    HOOP_RETURN_IF_ERROR(device_.reserve(memory.device(), bytes));
  return device_.data();
}

}  // namespace hoop::runtime
