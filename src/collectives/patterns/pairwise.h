// Pairwise exchange for alltoall(v): n - 1 steps, in each of which every rank sends one block to
// one peer and receives one block from another, so no rank is ever the target of two senders.
//
// Two schedules:
//   kShift (any n): at step s in [1, n) rank r sends to (r + s) mod n and receives from
//                   (r - s) mod n.
//   kXor (n a power of two): at step s rank r sends to and receives from r XOR s, so each step
//                   pairs ranks up and both directions of a link are busy at once.
// default_pairwise_schedule picks kXor for powers of two and kShift otherwise. A rank's own block
// (src == dst) is copied locally and is not part of any step.
#pragma once

namespace hoop::patterns {

/// Which pairwise schedule to walk.
enum class PairwiseSchedule { kShift, kXor };

/// One rank's step: send its block for `send_to`, receive the block `recv_from` has for it.
struct PairwiseStep {
  int send_to = 0;
  int recv_from = 0;
  /// Steps are equal when both peers are.
  friend bool operator==(const PairwiseStep&, const PairwiseStep&) = default;
};

/// kXor when `size` is a power of two, else kShift.
PairwiseSchedule default_pairwise_schedule(int size);

/// Step `step` (in [1, size)) of `schedule` for `rank` of `size`; kXor needs a power-of-two size.
PairwiseStep pairwise_step(int rank, int size, int step, PairwiseSchedule schedule);

}  // namespace hoop::patterns
