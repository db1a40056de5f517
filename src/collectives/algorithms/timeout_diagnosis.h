// What a timed-out collective can learn about why: a rank whose call timed out waits for the
// peer its transport names, but that peer may itself be waiting for a third rank that stopped
// (SIGSTOP, a hung process, a cut link). Each rank whose call timed out marks itself in the
// rendezvous store and looks, for a short grace period, at which ranks marked themselves too:
// the ranks that did not are the ones the job waits for, and every survivor names them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "hoop/rendezvous.h"

namespace hoop::collectives {

/// Marks `info.rank`'s timeout of call number `call` under `prefix` in the store `info` names,
/// waits up to `grace` for the other ranks' marks, and returns a sentence naming the ranks
/// without one, to append to the timeout's message; empty when the store cannot tell (no
/// store, it fails or does not answer, or the job is too large to list). The look-ups go over
/// a connection of their own whose every call is bounded by `grace`: a rank cut off from the
/// store still reports its timeout promptly.
std::string diagnose_timeout(const BootstrapInfo& info, const std::string& prefix,
                             std::uint64_t call, std::chrono::milliseconds grace);

}  // namespace hoop::collectives
