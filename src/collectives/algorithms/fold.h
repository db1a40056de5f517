// The non-power-of-two fold around recursive doubling and Rabenseifner (patterns::Fold): the
// first 2 * (size - p) ranks pair up, one of each pair hands its data to the other and sits
// the exchange out, and gets the finished result back at the end.
#pragma once

#include <cstddef>
#include <functional>

#include "collectives/algorithms/context.h"
#include "collectives/patterns/recursive_doubling.h"

namespace hoop::collectives {

/// Before the exchange: a kFoldReceiver reduces its partner's `count` elements into `work`
/// (through `tmp`); a kFolded rank sends `work`, then receives the final result into it.
/// Returns true when this rank sat out, so `work` already holds the result.
Result<bool> fold_in(Context& ctx, const patterns::Fold& fold, std::byte* work, std::byte* tmp,
                     std::size_t count, DataType dtype, ReduceOp op);

/// fold_in over `bytes` bytes with `combine(work, tmp)` in place of an element-wise op (Adasum).
using FoldCombine = std::function<Status(std::byte* dst, const std::byte* src)>;
Result<bool> fold_in(Context& ctx, const patterns::Fold& fold, std::byte* work, std::byte* tmp,
                     std::size_t bytes, const FoldCombine& combine);

/// After the exchange: a kFoldReceiver sends the result in `work` to its folded partner.
Status fold_out(Context& ctx, const patterns::Fold& fold, const std::byte* work, std::size_t bytes);

}  // namespace hoop::collectives
