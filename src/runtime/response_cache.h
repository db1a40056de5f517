// The response cache: the descriptions of tensors that have run, by slot, identical on every
// rank of a process set.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/message.h"

namespace hoop::runtime {

/// Remembers the descriptions of tensors that have run, so that a rank can name a tensor it
/// submits again with the same description by its slot: one integer instead of the whole
/// description. Every rank updates its cache from the same responses in the same order, so
/// slots agree everywhere. Slots are never reused for another name (a full cache stops taking
/// new names): a slot can then never mean a different tensor to another rank's coordinator,
/// whatever responses either has run.
class ResponseCache {
 public:
  /// A cache of at most `capacity` names (0: caching off).
  explicit ResponseCache(std::size_t capacity) : capacity_(capacity) {}

  /// The slot holding exactly this description, if any.
  std::optional<std::uint32_t> find(const Request& r) const;
  /// The slot of `name` whatever its description, if any.
  std::optional<std::uint32_t> slot_of(const std::string& name) const;
  /// The description in `slot`, or null for a slot never filled.
  const Request* at(std::uint32_t slot) const {
    return slot < slots_.size() ? slots_[slot].get() : nullptr;
  }
  /// The description in `slot`, a filled one, shared: responses hold it without a copy, and
  /// it outlives a later put() of another description under the same name.
  const std::shared_ptr<const Request>& shared(std::uint32_t slot) const { return slots_[slot]; }
  /// Records a tensor that ran: its name's slot takes the new description, or a new slot is
  /// filled while there is room. Only allreduce, broadcast and reducescatter are cached (the
  /// others' first dimensions may change from step to step).
  void put(const std::shared_ptr<const Request>& r);
  /// put() of a description of the caller's.
  void put(const Request& r) { put(std::make_shared<const Request>(r)); }
  std::size_t size() const { return slots_.size(); }
  /// At most `capacity` names from now on (rank 0's, announced before any rank caches a
  /// tensor); the names held stay.
  void set_capacity(std::size_t capacity) { capacity_ = capacity; }

 private:
  std::size_t capacity_;
  std::vector<std::shared_ptr<const Request>> slots_;
  std::unordered_map<std::string, std::uint32_t> by_name_;
};

}  // namespace hoop::runtime
