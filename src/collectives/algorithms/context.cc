#include "collectives/algorithms/context.h"

namespace hoop::collectives {

std::byte* Scratch::get(int slot, std::size_t bytes) {
  // Never zero-sized, so callers always get a valid pointer even for empty transfers.
  bytes = bytes == 0 ? 1 : bytes;
  if (sizes_[slot] < bytes) {
    buffers_[slot].reset();  // free first: peak memory stays at one buffer
    buffers_[slot] = std::make_unique_for_overwrite<std::byte[]>(bytes);
    sizes_[slot] = bytes;
  }
  return buffers_[slot].get();
}

Status Context::exchange(int to, const void* send_data, std::size_t send_bytes, int from,
                         void* recv_data, std::size_t recv_bytes) {
  // The receive goes first so that a peer's early data lands in place rather than in the
  // transport's unexpected-message buffer.
  HOOP_ASSIGN_OR_RETURN(RequestId r, recv(from, recv_data, recv_bytes));
  Result<RequestId> s = send(to, send_data, send_bytes);
  if (!s.ok()) return s.status();
  const RequestId ids[2] = {r, *s};
  return wait(ids);
}

}  // namespace hoop::collectives
