// split and dup: communicators over a subset of a communicator's ranks that reuse its
// connections. A GroupTransport renumbers the ranks onto the connections' own transport; the
// per-pair order of that transport is then shared by every communicator over it, which is why
// their calls keep one order on the ranks they share (communicator.h).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/group.h"

namespace hoop {
namespace {

/// The connections' ranks of `comm`'s ranks: comm's rank mapping when it was split itself.
std::vector<int> connection_ranks(collectives::CommImpl& comm) {
  if (const auto* group = dynamic_cast<const collectives::GroupTransport*>(&comm.transport()))
    return group->members();
  std::vector<int> all(static_cast<std::size_t>(comm.size()));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

}  // namespace

Result<std::unique_ptr<Communicator>> split(Communicator& comm, int color, int key) {
  auto* impl = collectives::impl_of(comm);
  if (impl == nullptr)
    return invalid_argument(
        "split: needs a communicator built by Communicator::create or split");
  if (color < 0 && color != kNoColor)
    return invalid_argument(fmt::format(
        "split: color {} is negative (kNoColor, -1, is the only negative color: no group)", color));
  const int n = comm.size();
  const std::int64_t mine[2] = {color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(n));
  HOOP_RETURN_IF_ERROR(allgather(comm, {.input = mine, .output = all.data(), .count = 2,
                                        .dtype = DataType::kI64})
                           .with_context("split"));
  const std::uint64_t index = impl->next_split();  // the same on every rank
  if (color == kNoColor) return std::unique_ptr<Communicator>();

  // The ranks of this color by (key, rank): their order is the new communicator's.
  std::vector<int> group;
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<std::size_t>(r)] == color) group.push_back(r);
  std::stable_sort(group.begin(), group.end(), [&](int a, int b) {
    return all[2 * static_cast<std::size_t>(a) + 1] < all[2 * static_cast<std::size_t>(b) + 1];
  });
  const std::vector<int> base = connection_ranks(*impl);
  std::vector<int> members;
  for (int r : group) members.push_back(base[static_cast<std::size_t>(r)]);

  collectives::CostParams cost = impl->cost();
  cost.hierarchical = false;  // the hierarchy's groups are the job communicator's
  auto child = std::make_unique<collectives::CommImpl>(
      impl->connections(),
      std::make_unique<collectives::GroupTransport>(*impl->connections()->transport,
                                                    std::move(members), /*renumber=*/true),
      impl->forced_algorithm(), comm.timeout(), cost);
  child->set_call_check(impl->call_check() != nullptr);
  if (const patterns::Ring* ring = impl->ring()) {
    // Keep the parent's ring order (each host's ranks together) among the group's ranks.
    std::vector<int> order(group.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return ring->position(group[static_cast<std::size_t>(a)]) <
             ring->position(group[static_cast<std::size_t>(b)]);
    });
    HOOP_RETURN_IF_ERROR(child->set_ring_order(std::move(order)));
  }
  const collectives::DeviceSetup& from = impl->device_setup();
  collectives::DeviceSetup setup;
  setup.info = from.info;
  setup.info.rank = child->rank();
  setup.info.size = static_cast<int>(group.size());
  setup.store = from.store;
  setup.owned_store = from.owned_store;
  setup.key_prefix = fmt::format("{}/split{}/{}", from.key_prefix.empty() ? "hoop" : from.key_prefix,
                                 index, color);
  setup.one_host = from.one_host;
  child->set_device_setup(std::move(setup));
  return std::unique_ptr<Communicator>(std::move(child));
}

Result<std::unique_ptr<Communicator>> dup(Communicator& comm) {
  return split(comm, 0, comm.rank());
}

}  // namespace hoop
