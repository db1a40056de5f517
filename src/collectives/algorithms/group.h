// A subgroup of a transport's ranks seen as a transport of its own, so that an algorithm written
// for "ranks 0..n-1" runs unchanged inside one host or across the hosts' i-th ranks (the
// hierarchical allreduce's phases), or over a communicator split from another (split()).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/transport.h"

namespace hoop::collectives {

/// `text` with each "rank N" of `base`'s numbering written in the group's: "rank G [job rank
/// N]" for a member, "job rank N" for a rank outside the group. A "rank N" already so written
/// (followed by " [", or preceded by "job ") is left as it is.
std::string to_group_numbering(std::string_view text, const std::vector<int>& members);
/// `text` with each "rank G" of the group's numbering written "rank G [job rank N]", where N
/// is members[G] (the same mark, so that to_group_numbering leaves it).
std::string mark_group_numbering(std::string_view text, const std::vector<int>& members);

/// Ranks 0..members.size()-1 of the group are members[i] of `base`; requests are the base's.
class GroupTransport final : public Transport {
 public:
  /// `members` are ranks of `base` and include base.rank(). With `renumber` (a communicator
  /// split from the job's, whose user counts in the group's numbering) the errors of the base
  /// name ranks in the group's numbering, with the job's in brackets; an abort's cause, written
  /// in the group's numbering, reaches the base's peers marked the same way. (The hierarchical
  /// allreduce's phase groups keep the job's numbering: their user is the job communicator.)
  GroupTransport(Transport& base, std::vector<int> members, bool renumber = false)
      : base_(base),
        members_(std::move(members)),
        rank_(static_cast<int>(std::find(members_.begin(), members_.end(), base.rank()) -
                               members_.begin())),
        // A group numbered as the job is (dup) has nothing to rewrite.
        renumber_(renumber && !numbered_as_base(members_, base.size())) {}

  /// The base's rank of each of the group's ranks.
  const std::vector<int>& members() const { return members_; }

  std::string_view name() const override { return base_.name(); }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  bool accepts_device_memory() const override { return base_.accepts_device_memory(); }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    return on_base(&Transport::send, peer, data, bytes);
  }
  Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) override {
    return on_base(&Transport::send_more, peer, data, bytes);
  }
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override {
    return on_base(&Transport::send_lent, peer, data, bytes);
  }
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) override {
    return on_base(&Transport::send_awaited, peer, data, bytes);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override {
    return on_base(&Transport::recv, peer, data, bytes);
  }
  Status wait(std::span<const RequestId> ids, Deadline deadline) override {
    return renumbered(base_.wait(ids, deadline));
  }
  Result<bool> test(RequestId id) override {
    Result<bool> r = base_.test(id);
    if (!r.ok()) return renumbered(r.status());
    return r;
  }
  void poll(std::chrono::microseconds timeout) override { base_.poll(timeout); }
  void wake() override { base_.wake(); }
  bool await_activity(std::chrono::microseconds timeout, bool messages) override {
    return base_.await_activity(timeout, messages);
  }
  void abort(const Status& cause) override {
    if (!renumber_) return base_.abort(cause);
    base_.abort(Status(cause.code(), mark_group_numbering(cause.message(), members_)));
  }

 private:
  /// `post` on the base for the group's rank `peer`, its errors in the group's numbering.
  template <typename Buffer>
  Result<RequestId> on_base(Result<RequestId> (Transport::*post)(int, Buffer, std::size_t),
                            int peer, Buffer data, std::size_t bytes) {
    HOOP_RETURN_IF_ERROR(check(peer));
    Result<RequestId> r = (base_.*post)(members_[peer], data, bytes);
    if (!r.ok()) return renumbered(r.status());
    return r;
  }
  static bool numbered_as_base(const std::vector<int>& members, int base_size) {
    if (static_cast<int>(members.size()) != base_size) return false;
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i] != static_cast<int>(i)) return false;
    return true;
  }

  Status renumbered(Status s) const {
    if (!renumber_ || s.ok()) return s;
    return Status(s.code(), to_group_numbering(s.message(), members_));
  }

  Status check(int peer) const {
    if (peer < 0 || peer >= size())
      return invalid_argument(
          fmt::format("peer {} is not a rank of this {}-rank group", peer, size()));
    return Status::success();
  }

  Transport& base_;
  std::vector<int> members_;
  int rank_;
  bool renumber_;
};

}  // namespace hoop::collectives
