// One transport over several: each peer is served by the transport its pair was given (shm to
// the ranks of this host, tcp to the others), behind the one Transport interface the
// collectives see.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hoop/transport.h"

namespace hoop::topology {

/// Routes every request to the part that serves its peer.
class RoutedTransport final : public Transport {
 public:
  /// `parts` use global rank numbers; route[peer] is the index of the part serving `peer`
  /// (ignored for this rank). At most 4 parts.
  static Result<std::unique_ptr<Transport>> create(std::vector<std::unique_ptr<Transport>> parts,
                                                   std::vector<int> route);

  std::string_view name() const override { return name_; }
  int rank() const override { return parts_.front()->rank(); }
  int size() const override { return parts_.front()->size(); }
  bool accepts_device_memory() const override;
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  /// Waits in the one part when all of `ids` belong to it and no other part has requests
  /// pending; otherwise polls the parts in turn, so that every pending request moves (a rank
  /// waiting for its shm neighbour must keep feeding its tcp neighbour, or a ring that spans
  /// hosts deadlocks).
  Status wait(std::span<const RequestId> ids, Deadline deadline) override;
  Result<bool> test(RequestId id) override;
  void poll(std::chrono::microseconds timeout) override;
  void wake() override;
  void abort(const Status& cause) override;

  /// The part that serves `peer` (not this rank), for an algorithm that drives two parts from
  /// two threads at once (each part used by one thread only, and by nothing else meanwhile).
  Transport* part_for(int peer) const {
    return peer >= 0 && peer < size() && peer != rank() ? parts_[route_[peer]].get() : nullptr;
  }

 private:
  RoutedTransport(std::vector<std::unique_ptr<Transport>> parts, std::vector<int> route);

  static constexpr unsigned kPartBits = 2;
  RequestId outer(int part, RequestId inner) const { return (inner << kPartBits) | part; }
  static int part_of(RequestId id) { return static_cast<int>(id & ((1u << kPartBits) - 1)); }
  static RequestId inner(RequestId id) { return id >> kPartBits; }
  Status check_peer(int peer) const;
  /// Posts through the part serving `peer` (`how`: its send, send_more, ..., or recv).
  template <typename Data>
  Result<RequestId> post(Result<RequestId> (Transport::*how)(int, Data, std::size_t), int peer,
                         Data data, std::size_t bytes);

  std::vector<std::unique_ptr<Transport>> parts_;
  std::vector<int> route_;
  /// Whether no part but `part` has requests pending.
  bool others_idle(int part) const;

  std::string name_;
  std::chrono::microseconds idle_slice_{100};  // see poll()
  std::size_t pending_[1u << kPartBits] = {};  // requests posted and not yet consumed, per part
};

}  // namespace hoop::topology
