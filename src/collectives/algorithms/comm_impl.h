// The one concrete Communicator: a transport plus what the collectives keep between calls.
#pragma once

#include <memory>
#include <optional>
#include <typeinfo>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/async.h"
#include "collectives/algorithms/call_check.h"
#include "collectives/algorithms/context.h"
#include "collectives/algorithms/cost_model.h"
#include "collectives/algorithms/device_path.h"
#include "hoop/communicator.h"

namespace hoop::collectives {

/// What the communicators split from one Communicator::create share: the transport, and the
/// thread that runs their non-blocking calls. The queue is declared last, so that its thread
/// ends before the transport does.
struct Connections {
  explicit Connections(std::unique_ptr<Transport> t) : transport(std::move(t)) {}
  std::unique_ptr<Transport> transport;
  AsyncQueue queue;
};

/// Communicator over one transport; not thread-safe (one collective at a time).
class CommImpl final : public Communicator {
 public:
  /// Takes the transport and the settings resolved by Communicator::create.
  CommImpl(std::unique_ptr<Transport> transport, Algorithm algorithm,
           std::chrono::milliseconds timeout, CostParams cost)
      : CommImpl(std::make_shared<Connections>(std::move(transport)), nullptr, algorithm, timeout,
                 cost) {}
  /// A communicator over `connections`, seen through `view` (split's rank mapping; null: the
  /// connections' transport itself).
  CommImpl(std::shared_ptr<Connections> connections, std::unique_ptr<Transport> view,
           Algorithm algorithm, std::chrono::milliseconds timeout, CostParams cost)
      : connections_(std::move(connections)),
        view_(std::move(view)),
        transport_(view_ != nullptr ? view_.get() : connections_->transport.get()),
        rank_(transport_->rank()),
        size_(transport_->size()),
        algorithm_(algorithm),
        timeout_(timeout),
        cost_(cost),
        // A split's view renumbers the ranks; its collectives go through messages.
        slots_(view_ == nullptr && transport_->size() > 1 ? transport_->shared_slots() : nullptr) {
    if (slots_ != nullptr)
      slot_sizes_ = {slots_->default_slot_bytes(), slots_->small_slot_bytes(),
                     slots_->small_slots()};
  }
  /// Waits for the non-blocking calls still queued (some may be this communicator's).
  ~CommImpl() override { connections_->queue.drain(); }

  // A transport's rank and size never change; kept here, every collective's several asks
  // cost a load, not two virtual calls.
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Transport& transport() override { return *transport_; }
  /// The connections this communicator shares with those split from it.
  const std::shared_ptr<Connections>& connections() const { return connections_; }
  /// The thread of this communicator's non-blocking calls.
  AsyncQueue& async() { return connections_->queue; }
  Algorithm forced_algorithm() const override { return algorithm_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  /// The cost-model constants used for kAuto.
  const CostParams& cost() const { return cost_; }
  /// Marks the job crowded (CostParams::crowded) once all ranks have agreed on it. Such a job
  /// whose reads are slow prefers the slots (slots_over_reads) and fills them whole
  /// (SharedSlots::default_slot_bytes).
  void set_crowded(bool crowded) {
    cost_.crowded = crowded;
    slots_over_reads_ = crowded && slots_ != nullptr && slots_->reads_slowly();
    if (slots_ != nullptr)
      slot_sizes_.slot_bytes =
          slots_over_reads_ ? slots_->slot_bytes() : slots_->default_slot_bytes();
  }
  /// A crowded job whose cross-memory reads are slow, the same on every rank: the ranks wait
  /// for cores at each step of the reading paths, and the slots win larger calls
  /// (one_host.h's budgets, slots_before_reads).
  bool slots_over_reads() const { return slots_over_reads_; }
  /// Makes the hierarchical allreduce available over `h` (CostParams::hierarchical).
  void set_hierarchy(Hierarchy h) {
    hierarchy_ = std::move(h);
    hierarchy_->cross_scratch = &cross_scratch_;
    cost_.hierarchical = true;
  }
  /// The groups of the hierarchical allreduce, or null when the job has no such shape.
  const Hierarchy* hierarchy() const { return hierarchy_ ? &*hierarchy_ : nullptr; }
  /// The scratch buffers reused across collectives.
  Scratch& scratch() { return scratch_; }
  /// Lays every ring collective's ring out in `order` (a permutation of the ranks; topology's
  /// ring order); invalid_argument otherwise.
  Status set_ring_order(std::vector<int> order) {
    HOOP_ASSIGN_OR_RETURN(patterns::Ring ring, patterns::Ring::from_order(std::move(order)));
    ring_.emplace(std::move(ring));
    return Status::success();
  }
  /// That ring, or null for rank order.
  const patterns::Ring* ring() const { return ring_ ? &*ring_ : nullptr; }
  /// The call fingerprints' state (call_check.h), or null when HOOP_CALL_CHECK turned them off.
  CallCheck* call_check() { return check_calls_ ? &call_check_ : nullptr; }
  void set_call_check(bool on) { check_calls_ = on; }
  /// Keeps what the first device collective needs to set up the device side.
  void set_device_setup(DeviceSetup setup) { device_setup_ = std::move(setup); }
  /// Where this rank sits in the job and how to reach its store (store_host empty: none, as
  /// over MPI), and the communicator's key prefix.
  const BootstrapInfo& info() const { return device_setup_.info; }
  const std::string& key_prefix() const { return device_setup_.key_prefix; }
  /// Numbers the collectives of this communicator (the same sequence on every rank).
  std::uint64_t next_call() { return ++calls_; }
  /// The transport's shared slots (one_host.h), or null: collectives go through messages.
  SharedSlots* slots() const { return slots_; }
  /// The slots' sizes (SharedSlots' own, all zero without slots).
  struct SlotSizes {
    std::size_t slot_bytes = 0;        ///< the bytes of a large slot that calls fill
    std::size_t small_slot_bytes = 0;  ///< a small slot's bytes
    std::size_t small_slots = 0;       ///< how many small slots each rank has
  };
  /// Fixed for the transport's life: read once, where a small call asked the transport for them
  /// half a dozen times.
  const SlotSizes& slot_sizes() const { return slot_sizes_; }
  /// Numbers the calls through the slots (the same sequence on every rank).
  std::uint64_t next_slot_call() { return ++slot_calls_; }
  /// Where the last slot call found each rank's payload (size() entries).
  std::vector<const std::byte*>& slot_payloads() { return slot_payloads_; }
  /// What this rank still owes the slot calls it left without seeing every rank's slot (a
  /// rooted call's giving ranks, or its receivers): one_host.cc confirms them later.
  struct SlotLedger {
    std::uint64_t confirmed = 0;          ///< every slot call up to this one is confirmed
    std::uint64_t large = 0;              ///< an unconfirmed call in the two large slots (0: none)
    std::uint64_t digest = 0;             ///< of the hashes of every slot call published so far
    std::vector<const std::byte*> found;  ///< the confirming gathers' scratch
  };
  SlotLedger& slot_ledger() { return slot_ledger_; }
  /// Numbers the splits of this communicator (the same sequence on every rank).
  std::uint64_t next_split() { return ++splits_; }
  /// Keeps the store connection Communicator::create made, for the device side's set-up.
  void adopt_store(std::unique_ptr<Store> store) { device_setup_.owned_store = std::move(store); }
  /// The device side's set-up, for a communicator split from this one.
  const DeviceSetup& device_setup() const { return device_setup_; }
  /// The device side for buffers on `device`, set up at the first call (collectively).
  Result<DevicePart*> device(int device) {
    return device_part(device_part_, device_setup_, device, timeout_);
  }
  /// The route of `call` on this communicator's device side `part` (collectively set up).
  Result<DeviceRoute> route(DevicePart& part, const RouteCall& call) {
    return route_call(part, device_setup_, call, timeout_);
  }

 private:
  std::shared_ptr<Connections> connections_;
  std::unique_ptr<Transport> view_;
  Transport* transport_;
  int rank_;
  int size_;
  Algorithm algorithm_;
  std::chrono::milliseconds timeout_;
  CostParams cost_;
  Scratch scratch_;
  CallCheck call_check_;
  bool check_calls_ = true;
  std::uint64_t calls_ = 0;
  std::uint64_t splits_ = 0;
  SharedSlots* slots_;
  SlotSizes slot_sizes_;
  bool slots_over_reads_ = false;
  std::uint64_t slot_calls_ = 0;
  std::vector<const std::byte*> slot_payloads_;
  SlotLedger slot_ledger_;
  Scratch cross_scratch_;  // the hierarchical allreduce's cross-host thread
  std::optional<Hierarchy> hierarchy_;
  std::optional<patterns::Ring> ring_;
  DeviceSetup device_setup_;
  std::unique_ptr<DevicePart> device_part_;
};

/// `comm` as hoop's own communicator, or null where it is another implementation of the
/// interface. A type comparison instead of dynamic_cast, whose walk of the class hierarchy was 3 %
/// of a small call's time through the shared slots (CommImpl is final: no subclass to miss).
inline CommImpl* impl_of(Communicator& comm) {
  return typeid(comm) == typeid(CommImpl) ? static_cast<CommImpl*>(&comm) : nullptr;
}

}  // namespace hoop::collectives
