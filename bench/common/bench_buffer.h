// Where a benchmark's collectives read and write. The loops write inputs into host() and check
// results there; the collective itself is given target(): host() itself for host memory, or
// memory elsewhere (a CUDA device's) that push() and pull() copy to and from outside the timed
// iterations, so the #wrong column means the same wherever the buffers live.
#pragma once

#include <cstddef>
#include <memory>

#include "bench/common/bench_data.h"
#include "hoop/core.h"

namespace hoop::bench {

/// One benchmark buffer in host memory; subclasses put target() elsewhere.
class BenchBuffer {
 public:
  /// A page-aligned host buffer of at least `bytes` bytes (see allocate()).
  static Result<std::unique_ptr<BenchBuffer>> host_memory(std::size_t bytes);
  virtual ~BenchBuffer() = default;
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;

  /// The host memory the loops fill and check.
  std::byte* host() const { return host_.get(); }
  /// The memory the collective is given; host() unless a subclass says otherwise.
  virtual std::byte* target() const { return host(); }
  /// Copies the first `bytes` of host() to target() (nothing to do for host memory).
  virtual Status push(std::size_t /*bytes*/) { return Status::success(); }
  /// Copies the first `bytes` of target() to host() (nothing to do for host memory).
  virtual Status pull(std::size_t /*bytes*/) { return Status::success(); }

  /// The target() address of `at`, an address inside host().
  std::byte* target_of(const std::byte* at) const { return target() + (at - host()); }

 protected:
  explicit BenchBuffer(Buffer host) : host_(std::move(host)) {}

 private:
  Buffer host_;
};

}  // namespace hoop::bench
