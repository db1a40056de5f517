#include "tests/fuzz/fuzz_runner.h"

#include <cstring>
#include <functional>
#include <optional>

#include "tests/fuzz/fuzz_data.h"

namespace hoop::fuzz {
namespace {

using Problems = std::vector<std::string>;

void note(Problems& problems, std::string problem) {
  if (!problem.empty()) problems.push_back(std::move(problem));
}

/// A case's output buffer and, unless the case runs in place, its input in a buffer of its
/// own; both at the case's offsets, guarded.
class CaseBuffers {
 public:
  /// `fill_input` writes this rank's input of `in_bytes`; in place, it goes into the output at
  /// byte `in_at`.
  CaseBuffers(const Case& c, std::size_t out_bytes, std::size_t in_bytes, std::size_t in_at,
              const std::function<void(std::byte*)>& fill_input)
      : out_(out_bytes, c.output_offset, c.data_key ^ 0x6f7574u) {
    if (c.placement == Placement::kSeparate) {
      in_.emplace(in_bytes, c.input_offset, c.data_key ^ 0x696eu);
      fill_input(in_->data());
      in_copy_.assign(in_->data(), in_->data() + in_bytes);
      input_ = in_->data();
    } else {
      fill_input(out_.data() + in_at);
      input_ = c.placement == Placement::kAliased ? out_.data() + in_at : nullptr;
    }
  }

  const void* input() const { return input_; }
  std::byte* output() { return out_.data(); }

  /// The guards of both buffers, and a separate input left unchanged (it is const).
  void check(Problems& problems) const {
    note(problems, out_.check_guards("output"));
    if (!in_) return;
    note(problems, in_->check_guards("input"));
    // memcmp's pointers must not be null, even for no bytes (an empty vector's may be).
    if (!in_copy_.empty() && std::memcmp(in_->data(), in_copy_.data(), in_copy_.size()) != 0)
      note(problems, "the input buffer changed");
  }

 private:
  GuardedBuffer out_;
  std::optional<GuardedBuffer> in_;
  std::vector<std::byte> in_copy_;
  const void* input_ = nullptr;
};

/// Byte offsets of consecutive blocks of `counts` elements of `es` bytes, and their total.
std::vector<std::size_t> block_offsets(const std::vector<std::size_t>& counts, std::size_t es) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) at[i + 1] = at[i] + counts[i] * es;
  return at;
}

/// Stream of the block rank `from` sends to rank `to` in an alltoall(v).
std::uint64_t pair_stream(int from, int to, int n) {
  return static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(n) +
         static_cast<std::uint64_t>(to);
}

}  // namespace

Status CaseRunner::run(const Case& c, Problems& problems) {
  switch (c.collective) {
    case Collective::kAllreduce:
      return allreduce(c, problems);
    case Collective::kReduceScatter:
      return reduce_scatter(c, problems);
    case Collective::kReduceScatterv:
      return reduce_scatterv(c, problems);
    case Collective::kBroadcast:
      return broadcast(c, problems);
    case Collective::kAllgather:
      return allgather(c, problems);
    case Collective::kAllgatherv:
      return allgatherv(c, problems);
    case Collective::kAlltoall:
      return alltoall(c, problems);
    case Collective::kAlltoallv:
      return alltoallv(c, problems);
    case Collective::kBarrier:
      return hoop::barrier(comm_);
    case Collective::kReduce:
      return reduce(c, problems);
    case Collective::kGather:
      return gather(c, std::vector<std::size_t>(static_cast<std::size_t>(n_), c.count), problems);
    case Collective::kGatherv:
      return gather(c, c.counts, problems);
    case Collective::kScatter:
      return scatter(c, std::vector<std::size_t>(static_cast<std::size_t>(n_), c.count), problems);
    case Collective::kScatterv:
      return scatter(c, c.counts, problems);
  }
  return invalid_argument("unknown collective");
}

Status CaseRunner::allreduce(const Case& c, Problems& problems) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const ExactReduction data(c, n_);
  CaseBuffers b(c, bytes, bytes, 0, [&](std::byte* p) { data.input(me_, 0, c.count, p); });
  AllreduceOptions o;
  o.input = b.input();
  o.output = b.output();
  o.count = c.count;
  o.dtype = c.dtype;
  o.op = c.op;
  o.algorithm = c.algorithm;
  HOOP_RETURN_IF_ERROR(hoop::allreduce(comm_, o));
  std::vector<std::byte> expected(bytes);
  data.expected(0, c.count, expected.data());
  note(problems, compare(c.dtype, b.output(), expected.data(), c.count));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::reduce_scatter(const Case& c, Problems& problems) {
  const std::vector<std::size_t> counts(static_cast<std::size_t>(n_), c.count);
  return reduce_scatter_blocks(c, counts, problems, [&](const void* in, void* out) {
    return hoop::reduce_scatter(
        comm_, {.input = in, .output = out, .count = c.count, .dtype = c.dtype, .op = c.op});
  });
}

Status CaseRunner::reduce_scatterv(const Case& c, Problems& problems) {
  return reduce_scatter_blocks(c, c.counts, problems, [&](const void* in, void* out) {
    return hoop::reduce_scatterv(
        comm_, {.input = in, .output = out, .counts = c.counts, .dtype = c.dtype, .op = c.op});
  });
}

Status CaseRunner::reduce_scatter_blocks(
    const Case& c, const std::vector<std::size_t>& counts, Problems& problems,
    const std::function<Status(const void* in, void* out)>& call) {
  const std::size_t es = dtype_size(c.dtype);
  std::size_t all = 0, first = 0;
  for (int r = 0; r < n_; ++r) {
    if (r == me_) first = all;
    all += counts[static_cast<std::size_t>(r)];
  }
  const std::size_t mine = counts[static_cast<std::size_t>(me_)];
  const ExactReduction data(c, n_);
  // In place, the output holds every rank's whole input and the result lands in its front.
  const std::size_t out_count = c.placement == Placement::kSeparate ? mine : all;
  CaseBuffers b(c, out_count * es, all * es, 0, [&](std::byte* p) { data.input(me_, 0, all, p); });
  HOOP_RETURN_IF_ERROR(call(b.input(), b.output()));
  std::vector<std::byte> expected(mine * es);
  data.expected(first, mine, expected.data());
  note(problems, compare(c.dtype, b.output(), expected.data(), mine, first));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::broadcast(const Case& c, Problems& problems) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  GuardedBuffer buf(bytes, c.output_offset, c.data_key ^ 0x6f7574u);
  std::vector<std::byte> expected(bytes);
  fill_random(c.data_key, static_cast<std::uint64_t>(c.root), expected.data(), bytes);
  if (me_ == c.root && bytes > 0) std::memcpy(buf.data(), expected.data(), bytes);
  BroadcastOptions o;
  o.buffer = buf.data();
  o.count = c.count;
  o.dtype = c.dtype;
  o.root = c.root;
  HOOP_RETURN_IF_ERROR(hoop::broadcast(comm_, o));
  note(problems, compare(c.dtype, buf.data(), expected.data(), c.count));
  note(problems, buf.check_guards("buffer"));
  return Status::success();
}

Status CaseRunner::allgather(const Case& c, Problems& problems) {
  const std::size_t block = c.count * dtype_size(c.dtype);
  const auto n = static_cast<std::size_t>(n_);
  CaseBuffers b(c, block * n, block, block * static_cast<std::size_t>(me_),
                [&](std::byte* p) { fill_random(c.data_key, me_, p, block); });
  AllgatherOptions o;
  o.input = b.input();
  o.output = b.output();
  o.count = c.count;
  o.dtype = c.dtype;
  HOOP_RETURN_IF_ERROR(hoop::allgather(comm_, o));
  std::vector<std::byte> expected(block * n);
  for (std::size_t r = 0; r < n; ++r)
    fill_random(c.data_key, r, expected.data() + r * block, block);
  note(problems, compare(c.dtype, b.output(), expected.data(), c.count * n));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::allgatherv(const Case& c, Problems& problems) {
  const std::vector<std::size_t> at = block_offsets(c.counts, dtype_size(c.dtype));
  const std::size_t mine = at[me_ + 1] - at[me_];
  CaseBuffers b(c, at.back(), mine, at[me_],
                [&](std::byte* p) { fill_random(c.data_key, me_, p, mine); });
  AllgathervOptions o;
  o.input = b.input();
  o.output = b.output();
  o.counts = c.counts;
  o.dtype = c.dtype;
  HOOP_RETURN_IF_ERROR(hoop::allgatherv(comm_, o));
  std::vector<std::byte> expected(at.back());
  for (std::size_t r = 0; r < c.counts.size(); ++r)
    fill_random(c.data_key, r, expected.data() + at[r], at[r + 1] - at[r]);
  note(problems, compare(c.dtype, b.output(), expected.data(), at.back() / dtype_size(c.dtype)));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::alltoall(const Case& c, Problems& problems) {
  const std::size_t block = c.count * dtype_size(c.dtype);
  const auto n = static_cast<std::size_t>(n_);
  CaseBuffers b(c, block * n, block * n, 0, [&](std::byte* p) {
    for (int j = 0; j < n_; ++j)
      fill_random(c.data_key, pair_stream(me_, j, n_), p + j * block, block);
  });
  AlltoallOptions o;
  o.input = b.input();
  o.output = b.output();
  o.count = c.count;
  o.dtype = c.dtype;
  HOOP_RETURN_IF_ERROR(hoop::alltoall(comm_, o));
  std::vector<std::byte> expected(block * n);
  for (int j = 0; j < n_; ++j)
    fill_random(c.data_key, pair_stream(j, me_, n_), expected.data() + j * block, block);
  note(problems, compare(c.dtype, b.output(), expected.data(), c.count * n));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::alltoallv(const Case& c, Problems& problems) {
  const std::size_t es = dtype_size(c.dtype);
  const std::vector<std::size_t> sc = send_counts(c, n_, me_);
  const std::vector<std::size_t> rc = recv_counts(c, n_, me_);
  const std::vector<std::size_t> s_at = block_offsets(sc, es);
  const std::vector<std::size_t> r_at = block_offsets(rc, es);
  CaseBuffers b(c, r_at.back(), s_at.back(), 0, [&](std::byte* p) {
    for (int j = 0; j < n_; ++j)
      fill_random(c.data_key, pair_stream(me_, j, n_), p + s_at[j], s_at[j + 1] - s_at[j]);
  });
  AlltoallvOptions o;
  o.input = b.input();
  o.send_counts = sc;
  o.output = b.output();
  o.recv_counts = rc;
  o.dtype = c.dtype;
  HOOP_RETURN_IF_ERROR(hoop::alltoallv(comm_, o));
  std::vector<std::byte> expected(r_at.back());
  for (int j = 0; j < n_; ++j)
    fill_random(c.data_key, pair_stream(j, me_, n_), expected.data() + r_at[j],
                r_at[j + 1] - r_at[j]);
  note(problems, compare(c.dtype, b.output(), expected.data(), r_at.back() / es));
  b.check(problems);
  return Status::success();
}

/// The input of a rank other than the root of a reduce or gather: in a buffer of its own, left
/// unchanged; the call's output stays null there (only the root's is written).
class SenderInput {
 public:
  SenderInput(const Case& c, std::size_t bytes, const std::function<void(std::byte*)>& fill)
      : in_(bytes, c.input_offset, c.data_key ^ 0x696eu) {
    fill(in_.data());
    copy_.assign(in_.data(), in_.data() + bytes);
  }
  const std::byte* data() const { return in_.data(); }
  void check(Problems& problems) const {
    note(problems, in_.check_guards("input"));
    if (!copy_.empty() && std::memcmp(in_.data(), copy_.data(), copy_.size()) != 0)
      note(problems, "the input buffer changed");
  }

 private:
  GuardedBuffer in_;
  std::vector<std::byte> copy_;
};

Status CaseRunner::reduce(const Case& c, Problems& problems) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  const ExactReduction data(c, n_);
  auto fill = [&](std::byte* p) { data.input(me_, 0, c.count, p); };
  RootReduceOptions o{.count = c.count, .dtype = c.dtype, .op = c.op, .root = c.root};
  if (me_ != c.root) {
    const SenderInput in(c, bytes, fill);
    o.input = in.data();
    HOOP_RETURN_IF_ERROR(hoop::reduce(comm_, o));
    in.check(problems);
    return Status::success();
  }
  CaseBuffers b(c, bytes, bytes, 0, fill);
  o.input = b.input();
  o.output = b.output();
  HOOP_RETURN_IF_ERROR(hoop::reduce(comm_, o));
  std::vector<std::byte> expected(bytes);
  data.expected(0, c.count, expected.data());
  note(problems, compare(c.dtype, b.output(), expected.data(), c.count));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::gather(const Case& c, const std::vector<std::size_t>& counts,
                          Problems& problems) {
  const std::size_t es = dtype_size(c.dtype);
  const std::vector<std::size_t> at = block_offsets(counts, es);
  const std::size_t mine = at[me_ + 1] - at[me_];
  auto fill = [&](std::byte* p) { fill_random(c.data_key, me_, p, mine); };
  auto call = [&](const void* input, void* output) {
    if (c.collective == Collective::kGather)
      return hoop::gather(comm_, {.input = input, .output = output, .count = c.count,
                                  .dtype = c.dtype, .root = c.root});
    return hoop::gatherv(comm_, {.input = input, .output = output, .counts = counts,
                                 .dtype = c.dtype, .root = c.root});
  };
  if (me_ != c.root) {
    const SenderInput in(c, mine, fill);
    HOOP_RETURN_IF_ERROR(call(in.data(), nullptr));
    in.check(problems);
    return Status::success();
  }
  CaseBuffers b(c, at.back(), mine, at[me_], fill);
  HOOP_RETURN_IF_ERROR(call(b.input(), b.output()));
  std::vector<std::byte> expected(at.back());
  for (std::size_t r = 0; r < counts.size(); ++r)
    fill_random(c.data_key, r, expected.data() + at[r], at[r + 1] - at[r]);
  note(problems, compare(c.dtype, b.output(), expected.data(), at.back() / es));
  b.check(problems);
  return Status::success();
}

Status CaseRunner::scatter(const Case& c, const std::vector<std::size_t>& counts,
                           Problems& problems) {
  const std::size_t es = dtype_size(c.dtype);
  const std::vector<std::size_t> at = block_offsets(counts, es);
  const std::size_t mine = at[me_ + 1] - at[me_];
  auto call = [&](const void* input, void* output) {
    if (c.collective == Collective::kScatter)
      return hoop::scatter(comm_, {.input = input, .output = output, .count = c.count,
                                   .dtype = c.dtype, .root = c.root});
    return hoop::scatterv(comm_, {.input = input, .output = output, .counts = counts,
                                  .dtype = c.dtype, .root = c.root});
  };
  std::vector<std::byte> expected(mine);
  fill_random(c.data_key, me_, expected.data(), mine);
  // The root's input: every rank's block; in place, the root's output is its own block there
  // (kAliased) or null.
  std::optional<SenderInput> in;
  if (me_ == c.root) {
    in.emplace(c, at.back(), [&](std::byte* p) {
      for (std::size_t r = 0; r < counts.size(); ++r)
        fill_random(c.data_key, r, p + at[r], at[r + 1] - at[r]);
    });
  }
  if (in && c.placement != Placement::kSeparate) {
    std::byte* own = const_cast<std::byte*>(in->data()) + at[me_];
    HOOP_RETURN_IF_ERROR(call(in->data(), c.placement == Placement::kAliased ? own : nullptr));
    in->check(problems);  // its own block included: it stays where it is
    return Status::success();
  }
  GuardedBuffer out(mine, c.output_offset, c.data_key ^ 0x6f7574u);
  HOOP_RETURN_IF_ERROR(call(in ? in->data() : nullptr, out.data()));
  note(problems, compare(c.dtype, out.data(), expected.data(), mine / es));
  note(problems, out.check_guards("output"));
  if (in) in->check(problems);
  return Status::success();
}

}  // namespace hoop::fuzz
