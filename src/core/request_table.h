// The table a transport keeps its requests in, from the id a send or receive hands out to the
// wait or test that consumes it. A hash map did this before: its lookups, inserts and erases
// (with an allocation each) took a fifth of a small shared-memory sendrecv's time. Here an id
// names a slot directly (its index in the low half, the slot's generation in the high half), so
// a lookup is an index and a compare, a freed slot is reused without allocating, and an id
// whose request was consumed no longer matches its slot's generation. The slots live in chunks
// of a power-of-two size (a std::deque's index arithmetic took as long as the rest of a lookup),
// which never move once allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "hoop/transport.h"

namespace hoop {

template <typename Request>
class RequestTable {
 public:
  /// Adds a request in its default state: its id, and a reference that stays valid until the
  /// request is erased (other adds and erases do not move it).
  std::pair<RequestId, Request&> add() {
    std::uint32_t index;
    if (free_.empty()) {
      index = static_cast<std::uint32_t>(count_);
      if (count_ % kChunk == 0) chunks_.push_back(std::make_unique<Slot[]>(kChunk));
      ++count_;
    } else {
      index = free_.back();
      free_.pop_back();
    }
    Slot& s = slot(index);
    s.live = true;
    ++live_;
    return {id_of(s.generation, index), s.request};
  }

  /// The request `id` names, or null when it is unknown or was erased.
  Request* find(RequestId id) {
    const std::uint64_t index = id & 0xffffffffu;
    if (index >= count_) return nullptr;
    Slot& s = slot(index);
    return s.live && s.generation == (id >> 32) ? &s.request : nullptr;
  }
  const Request* find(RequestId id) const { return const_cast<RequestTable*>(this)->find(id); }
  bool contains(RequestId id) const { return find(id) != nullptr; }
  /// The request `id` names, which must be in the table.
  Request& at(RequestId id) { return *find(id); }
  const Request& at(RequestId id) const { return *find(id); }

  /// Removes request `id` if it is in the table; the slot's next request gets another id.
  void erase(RequestId id) {
    Request* r = find(id);
    if (r == nullptr) return;
    Slot& s = slot(id & 0xffffffffu);
    s.request = Request{};
    s.live = false;
    // Generation 0 is never handed out, so no id is 0 (and a zeroed id is always unknown).
    if (++s.generation == 0) s.generation = 1;
    free_.push_back(static_cast<std::uint32_t>(id & 0xffffffffu));
    --live_;
  }

  bool empty() const { return live_ == 0; }
  std::size_t size() const { return live_; }

  /// Calls f(id, request) for every request in the table, in no particular order; f must not
  /// add or erase requests.
  template <typename F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < count_; ++i) {
      Slot& s = slot(i);
      if (s.live) f(id_of(s.generation, static_cast<std::uint32_t>(i)), s.request);
    }
  }
  /// Whether pred(request) holds for any request in the table.
  template <typename Pred>
  bool any_of(Pred&& pred) const {
    for (std::size_t i = 0; i < count_; ++i) {
      const Slot& s = const_cast<RequestTable*>(this)->slot(i);
      if (s.live && pred(s.request)) return true;
    }
    return false;
  }

 private:
  struct Slot {
    std::uint32_t generation = 1;
    bool live = false;
    Request request{};
  };
  static RequestId id_of(std::uint32_t generation, std::uint32_t index) {
    return (static_cast<RequestId>(generation) << 32) | index;
  }

  static constexpr std::size_t kChunk = 64;
  Slot& slot(std::size_t index) { return chunks_[index / kChunk][index % kChunk]; }

  std::vector<std::unique_ptr<Slot[]>> chunks_;  // count_ slots in chunks of kChunk
  std::size_t count_ = 0;
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace hoop
