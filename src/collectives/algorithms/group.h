// A subgroup of a transport's ranks seen as a transport of its own, so that an algorithm written
// for "ranks 0..n-1" runs unchanged inside one host or across the hosts' i-th ranks (the
// hierarchical allreduce's phases), or over a communicator split from another (split()).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "hoop/transport.h"

namespace hoop::collectives {

/// Ranks 0..members.size()-1 of the group are members[i] of `base`; requests are the base's.
class GroupTransport final : public Transport {
 public:
  /// `members` are ranks of `base` and include base.rank().
  GroupTransport(Transport& base, std::vector<int> members)
      : base_(base),
        members_(std::move(members)),
        rank_(static_cast<int>(std::find(members_.begin(), members_.end(), base.rank()) -
                               members_.begin())) {}

  /// The base's rank of each of the group's ranks.
  const std::vector<int>& members() const { return members_; }

  std::string_view name() const override { return base_.name(); }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  bool accepts_device_memory() const override { return base_.accepts_device_memory(); }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    HOOP_RETURN_IF_ERROR(check(peer));
    return base_.send(members_[peer], data, bytes);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override {
    HOOP_RETURN_IF_ERROR(check(peer));
    return base_.recv(members_[peer], data, bytes);
  }
  Status wait(std::span<const RequestId> ids, Deadline deadline) override {
    return base_.wait(ids, deadline);
  }
  Result<bool> test(RequestId id) override { return base_.test(id); }
  void poll(std::chrono::microseconds timeout) override { base_.poll(timeout); }
  void wake() override { base_.wake(); }
  bool await_activity(std::chrono::microseconds timeout, bool messages) override {
    return base_.await_activity(timeout, messages);
  }
  void abort(const Status& cause) override { base_.abort(cause); }

 private:
  Status check(int peer) const {
    if (peer < 0 || peer >= size())
      return invalid_argument(
          fmt::format("peer {} is not a rank of this {}-rank group", peer, size()));
    return Status::success();
  }

  Transport& base_;
  std::vector<int> members_;
  int rank_;
};

}  // namespace hoop::collectives
