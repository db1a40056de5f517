// The CUDA IPC transport's slicing and ring arithmetic (internal to transports/cuda): pure
// functions, kept apart from the CUDA calls so that they are tested without a device.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hoop::cuda {

/// One slot's record in the receiver's control segment: the message the slot's bytes belong to
/// and where they go in it.
struct SliceRecord {
  std::uint64_t message_bytes;  // the whole message's length
  std::uint64_t offset;         // where this slice starts in the message
};
static_assert(sizeof(SliceRecord) == 16);

/// A length beyond this cannot be a real message: the record holds garbage.
inline constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 56;
/// The most slots a ring may have: their records fill the control segment's 64 KiB ring.
inline constexpr std::uint32_t kMaxSlots = 4096;

/// Slices a message of `bytes` travels as; an empty message still takes one (its length).
constexpr std::uint64_t slice_count(std::uint64_t bytes, std::uint64_t slice_bytes) {
  return bytes == 0 ? 1 : (bytes + slice_bytes - 1) / slice_bytes;
}

/// Payload bytes of the slice of a `bytes`-byte message that starts at `offset`.
constexpr std::uint64_t slice_length(std::uint64_t bytes, std::uint64_t offset,
                                     std::uint64_t slice_bytes) {
  return offset >= bytes ? 0 : std::min(slice_bytes, bytes - offset);
}

/// The slot record number `n` of a ring of `slots` uses (records are numbered from 0 for the
/// life of the ring; head and tail count them).
constexpr std::uint64_t slot_of(std::uint64_t n, std::uint32_t slots) { return n % slots; }

/// Whether record `n` may be written while the receiver has released `tail` records: its slot
/// then holds nothing the receiver has still to copy out.
constexpr bool slot_free(std::uint64_t n, std::uint64_t tail, std::uint32_t slots) {
  return n - tail < slots;
}

/// Byte offset, in a receiver's device allocation, of slot `slot` of the ring of its
/// `ring_index`-th sender.
constexpr std::uint64_t slot_offset(std::uint64_t ring_index, std::uint64_t slot,
                                    std::uint32_t slots, std::uint64_t slice_bytes) {
  return (ring_index * slots + slot) * slice_bytes;
}

/// Whether `r` is the record a receiver may read next: the first slice of a new message (of a
/// plausible length) when it is between messages, else the next slice of the message
/// `message_bytes` long whose bytes up to `next_offset` it has.
constexpr bool record_follows(const SliceRecord& r, bool in_message, std::uint64_t message_bytes,
                              std::uint64_t next_offset) {
  if (!in_message) return r.offset == 0 && r.message_bytes <= kMaxMessageBytes;
  return r.message_bytes == message_bytes && r.offset == next_offset && next_offset < message_bytes;
}

}  // namespace hoop::cuda
