#include "topology/routed_transport.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>

namespace hoop::topology {
namespace {

// How long a wait that spans parts, or a poll, sleeps in the last part before it looks at the
// others again: the bound on the extra latency a message of another part can see.
constexpr std::chrono::microseconds kSlice{100};
// The longest slice of a poll() while nothing is posted.
constexpr std::chrono::microseconds kMaxIdleSlice{1000};
// A wait that spans parts polls without sleeping this long after its last progress.
constexpr std::chrono::microseconds kSpin{200};

}  // namespace

Result<std::unique_ptr<Transport>> RoutedTransport::create(
    std::vector<std::unique_ptr<Transport>> parts, std::vector<int> route) {
  if (parts.empty() || parts.size() > (1u << kPartBits))
    return invalid_argument(fmt::format("routed transport: {} parts (1 to 4)", parts.size()));
  const int size = parts.front()->size();
  for (const auto& p : parts) {
    if (p->size() != size || p->rank() != parts.front()->rank())
      return invalid_argument("routed transport: the parts disagree on rank or size");
  }
  if (route.size() != static_cast<std::size_t>(size))
    return invalid_argument("routed transport: one route per rank is needed");
  for (int r = 0; r < size; ++r) {
    if (r != parts.front()->rank() && (route[r] < 0 || route[r] >= static_cast<int>(parts.size())))
      return invalid_argument(fmt::format("routed transport: rank {} has no part", r));
  }
  return std::unique_ptr<Transport>(new RoutedTransport(std::move(parts), std::move(route)));
}

RoutedTransport::RoutedTransport(std::vector<std::unique_ptr<Transport>> parts,
                                 std::vector<int> route)
    : parts_(std::move(parts)), route_(std::move(route)) {
  for (const auto& p : parts_) {
    if (!name_.empty()) name_ += '+';
    name_ += p->name();
  }
}

bool RoutedTransport::accepts_device_memory() const {
  return std::all_of(parts_.begin(), parts_.end(),
                     [](const auto& p) { return p->accepts_device_memory(); });
}

Status RoutedTransport::check_peer(int peer) const {
  if (peer < 0 || peer >= size() || peer == rank())
    return invalid_argument(fmt::format("{}: peer {} is not another rank of this job (rank {} of {})",
                                        name_, peer, rank(), size()));
  return Status::success();
}

template <typename Data>
Result<RequestId> RoutedTransport::post(Result<RequestId> (Transport::*how)(int, Data, std::size_t),
                                        int peer, Data data, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(check_peer(peer));
  const int p = route_[peer];
  idle_slice_ = kSlice;
  HOOP_ASSIGN_OR_RETURN(RequestId id, (parts_[p].get()->*how)(peer, data, bytes));
  ++pending_[p];
  return outer(p, id);
}

Result<RequestId> RoutedTransport::send(int peer, const void* data, std::size_t bytes) {
  return post(&Transport::send, peer, data, bytes);
}

Result<RequestId> RoutedTransport::send_more(int peer, const void* data, std::size_t bytes) {
  return post(&Transport::send_more, peer, data, bytes);
}

Result<RequestId> RoutedTransport::send_lent(int peer, const void* data, std::size_t bytes) {
  return post(&Transport::send_lent, peer, data, bytes);
}

Result<RequestId> RoutedTransport::send_awaited(int peer, const void* data, std::size_t bytes) {
  return post(&Transport::send_awaited, peer, data, bytes);
}

Result<RequestId> RoutedTransport::recv(int peer, void* data, std::size_t bytes) {
  return post(&Transport::recv, peer, data, bytes);
}

bool RoutedTransport::others_idle(int part) const {
  for (int p = 0; p < static_cast<int>(parts_.size()); ++p) {
    if (p != part && pending_[p] > 0) return false;
  }
  return true;
}

Status RoutedTransport::wait(std::span<const RequestId> ids, Deadline deadline) {
  // Split by part; the common case (every request on one part) is that part's own wait.
  std::vector<RequestId> by_part[1u << kPartBits];
  for (RequestId id : ids) by_part[part_of(id)].push_back(inner(id));
  int used = 0;
  int only = 0;
  for (int p = 0; p < static_cast<int>(parts_.size()); ++p) {
    if (!by_part[p].empty()) {
      ++used;
      only = p;
    }
  }
  // Consumed either way, as the contract says.
  for (int p = 0; p < static_cast<int>(parts_.size()); ++p) {
    pending_[p] -= std::min(pending_[p], by_part[p].size());
  }
  if (used <= 1 && others_idle(only)) return parts_[only]->wait(by_part[only], deadline);

  Status first = Status::success();
  auto last_progress = Clock::now();
  for (;;) {
    bool progressed = false;
    int pending_parts = 0;
    int pending_part = 0;
    for (int p = 0; p < static_cast<int>(parts_.size()); ++p) {
      auto& left = by_part[p];
      // Requests of this part that the caller does not wait for still need their bytes moved.
      if (left.empty() && pending_[p] > 0) parts_[p]->poll(std::chrono::microseconds{0});
      for (std::size_t i = 0; i < left.size();) {
        Result<bool> done = parts_[p]->test(left[i]);
        if (done.ok() && !*done) {
          ++i;
          continue;
        }
        if (!done.ok() && first.ok()) first = done.status();
        progressed = true;
        left[i] = left.back();
        left.pop_back();
      }
      if (!left.empty()) {
        ++pending_parts;
        pending_part = p;
      }
    }
    if (pending_parts == 0) return first;
    // Once one part is left its own wait takes over, with its own spinning and sleeping.
    if (pending_parts == 1 && others_idle(pending_part)) {
      Status rest = parts_[pending_part]->wait(by_part[pending_part], deadline);
      return first.ok() ? rest : first;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      // The parts' own waits name their outstanding peers and abort; a zero wait does both.
      for (int p = 0; p < static_cast<int>(parts_.size()); ++p) {
        if (by_part[p].empty()) continue;
        Status s = parts_[p]->wait(by_part[p], now);
        if (first.ok()) first = s;
      }
      abort(first);
      return first;
    }
    if (progressed) {
      last_progress = now;
    } else if (now - last_progress < kSpin) {
      sched_yield();
    } else {
      parts_.back()->poll(std::min(kSlice, std::chrono::duration_cast<std::chrono::microseconds>(
                                               deadline - now)));
    }
  }
}

Result<bool> RoutedTransport::test(RequestId id) {
  const int p = part_of(id);
  // Another part's bytes move too, as the contract's progress rule promises.
  for (int q = 0; q < static_cast<int>(parts_.size()); ++q) {
    if (q != p && pending_[q] > 0) parts_[q]->poll(std::chrono::microseconds{0});
  }
  Result<bool> done = parts_[p]->test(inner(id));
  if ((!done.ok() || *done) && pending_[p] > 0) --pending_[p];
  return done;
}

void RoutedTransport::poll(std::chrono::microseconds timeout) {
  if (parts_.size() == 1) return parts_.front()->poll(timeout);
  // No part can sleep on the others' events and none says whether its poll moved bytes, so one
  // call looks at the others and sleeps one slice in the last (poll may return early). The
  // slice doubles while nothing is posted, so an idle caller wakes rarely, and drops back once
  // the caller posts again (it just got a message).
  for (std::size_t p = 0; p + 1 < parts_.size(); ++p) parts_[p]->poll(std::chrono::microseconds{0});
  parts_.back()->poll(std::clamp(timeout, std::chrono::microseconds{0}, idle_slice_));
  idle_slice_ = std::min(idle_slice_ * 2, kMaxIdleSlice);
}

void RoutedTransport::wake() {
  for (auto& p : parts_) p->wake();
}

void RoutedTransport::abort(const Status& cause) {
  for (auto& p : parts_) p->abort(cause);
}

}  // namespace hoop::topology
