#include "transports/shm/shm_peers.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"

namespace hoop::shm {
namespace {

std::chrono::milliseconds remaining(Deadline deadline) {
  return std::max(std::chrono::milliseconds{0},
                  std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
}

bool process_exited(const Fd& pidfd, int pid) {
  if (pidfd.valid()) {
    pollfd p{pidfd.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
  }
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

Fd open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) return Fd(static_cast<int>(fd));
  HOOP_LOG(kDebug, "pidfd_open({}) failed: {}", pid, std::strerror(errno));
#endif
  return Fd();
}

PeerState peer_state(const SegmentHeader& header, const Fd& pidfd, int pid) {
  const bool exited = process_exited(pidfd, pid);
  // The goodbye flag is written before the process exits, so reading it after seeing the exit
  // tells an orderly shutdown from a crash.
  if (header.goodbye.load(std::memory_order_acquire) != 0) return PeerState::kGoodbye;
  return exited ? PeerState::kDied : PeerState::kAlive;
}

namespace {

/// One contiguous cross-memory copy between `local` and `remote` in process `pid`, in as many
/// calls as the kernel needs: process_vm_readv or process_vm_writev.
template <typename Call>
int move_memory_of(int pid, char* local, char* remote, std::size_t bytes, Call call) {
  while (bytes > 0) {
    iovec l{local, bytes};
    iovec r{remote, bytes};
    const ssize_t n = call(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    local += n;
    remote += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

int read_memory_of(int pid, const void* remote, void* local, std::size_t bytes) {
  return move_memory_of(pid, static_cast<char*>(local),
                        static_cast<char*>(const_cast<void*>(remote)), bytes, ::process_vm_readv);
}

int write_memory_of(int pid, const void* local, void* remote, std::size_t bytes) {
  return move_memory_of(pid, static_cast<char*>(const_cast<void*>(local)),
                        static_cast<char*>(remote), bytes, ::process_vm_writev);
}

namespace {

/// A position in a list of pieces, filling iovecs from there.
struct PieceCursor {
  std::span<const MemoryPiece> pieces;
  std::size_t index = 0;
  std::size_t offset = 0;  // bytes of pieces[index] already copied

  /// Fills up to `max` iovecs with what is left (empty pieces skipped); their count.
  int fill(iovec* iov, int max) const {
    int n = 0;
    std::size_t off = offset;
    for (std::size_t i = index; i < pieces.size() && n < max; ++i, off = 0) {
      if (pieces[i].bytes == off) continue;
      iov[n++] = iovec{reinterpret_cast<void*>(pieces[i].address + off), pieces[i].bytes - off};
    }
    return n;
  }
  void advance(std::size_t bytes) {
    while (bytes > 0) {
      const std::size_t step = std::min(bytes, pieces[index].bytes - offset);
      offset += step;
      bytes -= step;
      if (offset == pieces[index].bytes) {
        ++index;
        offset = 0;
      }
    }
  }
};

}  // namespace

namespace {

// Remote pieces less than this apart are read as one range, with the bytes between them landing
// in a scratch buffer: the kernel pins and walks every remote iovec on its own, which cost
// 0.9 us per 4 KiB piece on the 2-core guest (200 pieces a few bytes apart: 184 us read one by
// one, 100 us as one range). The bytes between two readable pieces less than a page apart lie
// on pages that hold bytes of one of them, so they are readable too; 4096 is no page size's
// upper bound, only every page size's lower one.
constexpr std::size_t kCoalesceGap = 4096;

/// A gap read with the pieces around it: after `at` bytes of pieces, `bytes` of other memory.
struct Gap {
  std::size_t at;
  std::size_t bytes;
};

/// `remote` with every gap below kCoalesceGap between a piece and a later one read as well, in
/// `r`; `local` in `l`, with a piece of `junk` wherever such a gap's bytes arrive.
void coalesce(std::span<const MemoryPiece> remote, std::span<const MemoryPiece> local,
              std::uintptr_t junk, std::vector<MemoryPiece>& r, std::vector<MemoryPiece>& l,
              std::vector<Gap>& gaps) {
  r.clear();
  l.clear();
  gaps.clear();
  std::size_t before = 0;
  for (const MemoryPiece& p : remote) {
    if (p.bytes == 0) continue;
    if (!r.empty()) {
      const std::uintptr_t end = r.back().address + r.back().bytes;
      if (p.address >= end && p.address - end < kCoalesceGap) {
        const std::size_t gap = p.address - end;
        if (gap > 0) gaps.push_back({before, gap});
        r.back().bytes += gap + p.bytes;
        before += p.bytes;
        continue;
      }
    }
    r.push_back(p);
    before += p.bytes;
  }
  std::size_t at = 0;  // bytes of `local` placed
  std::size_t g = 0;
  for (MemoryPiece p : local) {
    while (p.bytes > 0) {
      for (; g < gaps.size() && gaps[g].at == at; ++g) l.push_back({junk, gaps[g].bytes});
      const std::size_t take = g < gaps.size() ? std::min(p.bytes, gaps[g].at - at) : p.bytes;
      l.push_back({p.address, take});
      p.address += take;
      p.bytes -= take;
      at += take;
    }
  }
}

}  // namespace

int read_memory_of(int pid, std::span<const MemoryPiece> remote,
                   std::span<const MemoryPiece> local) {
  // The kernel takes at most IOV_MAX (1024) iovecs a side per call, and copies until either
  // side ends. No thread_local buffers: they would make libhoop need the dynamic loader.
  constexpr std::size_t kMaxIov = 1024;
  std::vector<MemoryPiece> rs;
  std::vector<MemoryPiece> ls;
  std::vector<Gap> gaps;
  rs.reserve(remote.size());
  ls.reserve(local.size());
  std::array<std::byte, kCoalesceGap> junk;
  coalesce(remote, local, reinterpret_cast<std::uintptr_t>(junk.data()), rs, ls, gaps);
  std::vector<iovec> r(std::min(kMaxIov, rs.size()));
  std::vector<iovec> l(std::min(kMaxIov, ls.size()));
  PieceCursor from{rs};
  PieceCursor to{ls};
  while (true) {
    const int nr = from.fill(r.data(), static_cast<int>(r.size()));
    const int nl = to.fill(l.data(), static_cast<int>(l.size()));
    if (nr == 0 || nl == 0) return 0;
    const ssize_t n = ::process_vm_readv(pid, l.data(), static_cast<unsigned long>(nl), r.data(),
                                         static_cast<unsigned long>(nr), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    from.advance(static_cast<std::size_t>(n));
    to.advance(static_cast<std::size_t>(n));
  }
}

bool can_read_memory_of(int pid, std::uint64_t address, std::uint64_t expect, std::string& why) {
  std::uint64_t got = 0;
  const int err = read_memory_of(pid, reinterpret_cast<const void*>(address), &got, sizeof got);
  if (err != 0) {
    why = fmt::format("process_vm_readv of pid {}: {}", pid, std::strerror(err));
    return false;
  }
  if (got != expect) {
    why = fmt::format("process_vm_readv of pid {} read {:#x} where {:#x} was expected", pid, got,
                      expect);
    return false;
  }
  return true;
}

bool cross_memory_reads_slow() {
  static const bool slow = [] {
    // 256 KiB stays in the L2 cache, so both copies measure the copying and the kernel's work
    // per page, not the memory. The best of five of each, interleaved, so that a busy moment
    // does not decide.
    constexpr std::size_t kBytes = std::size_t{256} << 10;
    std::vector<char> from(kBytes, 1);
    std::vector<char> to(kBytes, 2);
    auto best_cma = Clock::duration::max();
    auto best_copy = Clock::duration::max();
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      if (read_memory_of(::getpid(), from.data(), to.data(), kBytes) != 0) return false;
      const auto t1 = Clock::now();
      std::memcpy(to.data(), from.data(), kBytes);
      const auto t2 = Clock::now();
      best_cma = std::min(best_cma, t1 - t0);
      best_copy = std::min(best_copy, t2 - t1);
    }
    HOOP_LOG(kDebug, "shm: a cross-memory read of 256 KiB took {} ns, a memcpy {} ns",
             std::chrono::nanoseconds(best_cma).count(),
             std::chrono::nanoseconds(best_copy).count());
    return best_cma > kSlowReadRatio * best_copy;
  }();
  return slow;
}

std::size_t default_read_bytes(bool crowded) {
  if (!cross_memory_reads_slow()) return kLendFromBytes;
  return crowded ? kLendSlowCrowdedFromBytes : kLendSlowFromBytes;
}

std::optional<Status> posted_abort(const SegmentHeader& header, std::string_view transport) {
  if (header.abort_state.load(std::memory_order_acquire) != kAbortWritten) return std::nullopt;
  const auto code = static_cast<StatusCode>(header.abort_code);
  const std::string text(header.abort_text, std::min<std::size_t>(header.abort_len, kMaxAbortText));
  return Status(code == StatusCode::kOk ? StatusCode::kAborted : code,
                fmt::format("{}: rank {} aborted: {}", transport, header.abort_origin, text));
}

bool doze(SegmentHeader& header, std::int64_t timeout_us, const std::function<bool()>& ready) {
  const std::uint32_t seen = header.doorbell.load(std::memory_order_acquire);
  header.sleeping.fetch_add(1, std::memory_order_relaxed);
  // Pairs with ring_doorbell's publish_fence: a peer that published before this point is seen
  // by ready(), one that publishes after sees the flag and rings.
  sleep_fence(header);
  if (ready()) {
    header.sleeping.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }
  sleep_on_doorbell(header, seen, timeout_us);
  header.sleeping.fetch_sub(1, std::memory_order_relaxed);
  return header.doorbell.load(std::memory_order_acquire) != seen;
}

std::string peer_key(std::string_view prefix, std::string_view what, int rank) {
  return fmt::format("{}/{}/{}", prefix, what, rank);
}

Status wait_for_peers(Store& store, std::string_view transport, std::string_view prefix,
                      std::string_view what, std::string_view doing, std::span<const int> peers,
                      int rank, Deadline deadline, std::chrono::milliseconds budget) {
  std::vector<std::string> keys;
  for (int p : peers) keys.push_back(peer_key(prefix, what, p));
  const Status s = store.wait(keys, remaining(deadline));
  if (s.ok() || s.code() != StatusCode::kTimeout) {
    return s.with_context(
        fmt::format("{}: rank {} waiting for its peers to {}", transport, rank, doing));
  }
  std::string missing;
  for (int p : peers) {
    if (!store.get(peer_key(prefix, what, p)).ok())
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", p);
  }
  return timeout_error(fmt::format("{}: rank {}: rank(s) {} did not {} within {} ms", transport,
                                   rank, missing.empty() ? "?" : missing, doing, budget.count()));
}

}  // namespace hoop::shm
