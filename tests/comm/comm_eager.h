// comm_check's eager mode: the giving ranks of a small rooted call return before the others
// call it (the shared slots' SlotNeed, collectives/algorithms/one_host.h).
#pragma once

#include <string>

#include "hoop/communicator.h"

namespace hoop::comm_check {

/// How many small rooted calls the giving ranks make before the others call them: within what
/// HOOP_SHM_RUN_AHEAD lets them run ahead (its default is 128).
inline constexpr int kEagerCalls = 16;

/// Root 0's kEagerCalls broadcasts return, then it creates DIR/root and only then do the others
/// call them; the others' kEagerCalls gathers return, each creates DIR/rank<R>, and only then
/// does the root call them; a barrier ends it. Prints "rank R: eager ok" and returns 0, or
/// prints FAIL and returns 1 (a giving rank that waited for the others would wait for a file
/// that comes only after it returned, until the call's deadline).
int run_eager(Communicator& comm, const std::string& dir);

}  // namespace hoop::comm_check
