// An in-process transport for algorithm tests: the ranks of a job are threads of one process
// and a message is a copy handed from the sender's thread to the receiver's through a shared
// LoopbackFabric. It keeps the whole transport contract (hoop/transport.h): per-direction
// order, equal lengths (a protocol_error naming the peer and both lengths otherwise),
// deadlines, abort carrying its cause to every rank, and a peer that destroyed its transport
// failing later receives with peer_lost. Sends complete when posted (the bytes are copied).
//
// With a shuffle seed, every message becomes visible to its receiver only after a random
// number (0-3) of the receiver's progress passes. Order per direction still holds, as on every
// transport, but messages from different peers arrive in orders that real transports produce
// only by chance.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/transport.h"

namespace hoop::testing {

class LoopbackFabric;

/// Makes the fabric of a job of `size` ranks; shuffle_seed 0 delivers in posting order.
std::shared_ptr<LoopbackFabric> make_loopback_fabric(int size, std::uint64_t shuffle_seed = 0);

/// Rank `rank`'s transport on `fabric`; destroying it is an orderly shutdown of that rank.
std::unique_ptr<Transport> loopback_transport(std::shared_ptr<LoopbackFabric> fabric, int rank);

/// Runs `body(comm)` on a thread per rank, each with hoop's communicator over one fabric
/// (shuffle_seed as for make_loopback_fabric); returns the statuses by rank. A rank whose body
/// fails aborts its transport, so that its peers fail with its cause instead of at their
/// deadline.
std::vector<Status> on_ranks(int ranks, const std::function<Status(Communicator&)>& body,
                             std::uint64_t shuffle_seed = 0,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace hoop::testing
