#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <utility>

#include "core/fd.h"
#include "transports/shm/shm_transport.h"

namespace hoop::shm {
namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::size_t rings_offset() { return round_up(sizeof(SegmentHeader), kLine); }

long futex(std::atomic<std::uint32_t>& word, int op, std::uint32_t value, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word is in pages shared with other processes.
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), op, value, ts, nullptr, 0);
}

Result<std::pair<void*, std::size_t>> map_fd(int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(fmt::format("shm: fstat of {}", name), errno);
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes < sizeof(SegmentHeader)) {
    return protocol_error(fmt::format("shm: segment {} is too small ({} bytes)", name, bytes));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) return errno_error(fmt::format("shm: mmap of {}", name), errno);
  return std::pair{base, bytes};
}

}  // namespace

Segment::Segment(Segment&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, bytes_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

Result<Segment> Segment::create(const std::string& name, int owner, const int* senders,
                                std::size_t num_senders, std::size_t ring_bytes, SlotBytes slots,
                                std::size_t small_slots) {
  const std::size_t slot_bytes = slots.bytes;
  const std::size_t board_offset =
      round_up(rings_offset() + num_senders * sizeof(RingControl), kLine);
  const std::size_t slot_stride = round_up(kSlotDataOffset + slot_bytes, kLine);
  const std::size_t small_offset = board_offset + (slot_bytes > 0 ? 2 * slot_stride : 0);
  const std::size_t small_stride = round_up(kSlotDataOffset + kSmallSlotBytes, kLine);
  if (slot_bytes == 0) small_slots = 0;
  const std::size_t data_start = round_up(small_offset + small_slots * small_stride, kPage);
  const std::size_t total = data_start + num_senders * ring_bytes;
  Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid() && errno == EEXIST) {
    // A crashed run of the same job id left it behind: nobody can be using it now, since
    // every live segment is unlinked once its peers have mapped it.
    ::shm_unlink(name.c_str());
    fd = Fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  }
  if (!fd.valid()) return errno_error(fmt::format("shm: creating {}", name), errno);
  auto fail = [&](Status s) {
    ::shm_unlink(name.c_str());
    return s;
  };
  if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) {
    return fail(errno_error(fmt::format("shm: sizing {} to {} bytes", name, total), errno));
  }
  // Reserve the pages now: a /dev/shm too small for the rings is then a clear error here
  // rather than a SIGBUS in the middle of a transfer.
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(total)); err != 0) {
    return fail(errno_error(
        fmt::format("shm: reserving {} bytes for {} in /dev/shm (lower HOOP_SHM_RING_BYTES or "
                    "enlarge /dev/shm)",
                    total, name),
        err));
  }
  auto mapped = map_fd(fd.get(), name);
  if (!mapped.ok()) return fail(mapped.status());
  Segment seg;
  seg.base_ = mapped->first;
  seg.bytes_ = mapped->second;
  auto* h = new (seg.base_) SegmentHeader{};
  h->magic = kSegmentMagic;
  h->version = kLayoutVersion;
  h->rank = owner;
  h->pid = static_cast<std::int32_t>(::getpid());
  h->num_rings = static_cast<std::uint32_t>(num_senders);
  h->total_bytes = total;
  h->board_offset = board_offset;
  h->slot_stride = slot_stride;
  h->slot_bytes = slot_bytes;
  h->default_slot_bytes = std::min(slots.default_bytes, slot_bytes);
  h->small_offset = small_offset;
  h->small_stride = small_stride;
  h->small_bytes = small_slots > 0 ? kSmallSlotBytes : 0;
  h->small_slots = small_slots;
  h->owner_base = reinterpret_cast<std::uintptr_t>(seg.base_);
  h->sleeper_barrier = register_sleeper_barrier() ? 1 : 0;
  if (slot_bytes > 0)
    for (int i = 0; i < 2; ++i) new (seg.slot(i)) SlotHeader{};
  for (std::size_t i = 0; i < small_slots; ++i) new (seg.small_slot(i)) SlotHeader{};
  auto* rings = reinterpret_cast<RingControl*>(static_cast<char*>(seg.base_) + rings_offset());
  for (std::size_t i = 0; i < num_senders; ++i) {
    auto* r = new (&rings[i]) RingControl{};
    r->sender = senders[i];
    r->data_offset = data_start + i * ring_bytes;
    r->capacity = ring_bytes;
  }
  std::atomic_thread_fence(std::memory_order_release);
  return seg;
}

Result<Segment> Segment::open(const std::string& name, int owner) {
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) return errno_error(fmt::format("shm: opening rank {}'s {}", owner, name), errno);
  HOOP_ASSIGN_OR_RETURN(auto mapped, map_fd(fd.get(), name));
  Segment seg;
  seg.base_ = mapped.first;
  seg.bytes_ = mapped.second;
  std::atomic_thread_fence(std::memory_order_acquire);
  const SegmentHeader& h = *seg.header();
  const std::size_t rings_end = rings_offset() + std::size_t{h.num_rings} * sizeof(RingControl);
  if (h.magic != kSegmentMagic || h.version != kLayoutVersion || h.rank != owner ||
      h.total_bytes != seg.bytes_ || rings_end > seg.bytes_ ||
      (h.slot_bytes > 0 &&
       (h.board_offset < rings_end || h.board_offset % kLine != 0 ||
        h.slot_stride < kSlotDataOffset + h.slot_bytes || h.slot_stride % kLine != 0 ||
        h.default_slot_bytes > h.slot_bytes || h.slot_stride > seg.bytes_ / 2 ||
        h.board_offset > seg.bytes_ - 2 * h.slot_stride)) ||
      (h.small_slots > 0 &&
       (h.small_offset % kLine != 0 || h.small_offset < rings_end ||
        h.small_bytes != kSmallSlotBytes || h.small_stride < kSlotDataOffset + h.small_bytes ||
        h.small_stride % kLine != 0 || h.small_slots > seg.bytes_ / h.small_stride ||
        h.small_offset > seg.bytes_ - h.small_slots * h.small_stride))) {
    return protocol_error(fmt::format(
        "shm: {} is not rank {}'s segment of layout version {} (magic {:#x}, version {}, rank {})",
        name, owner, kLayoutVersion, h.magic, h.version, h.rank));
  }
  for (std::uint32_t i = 0; i < h.num_rings; ++i) {
    const RingControl& r =
        reinterpret_cast<const RingControl*>(static_cast<char*>(seg.base_) + rings_offset())[i];
    if (r.capacity < kMinRingBytes || r.capacity % kMessageAlign != 0 ||
        r.data_offset > seg.bytes_ || r.capacity > seg.bytes_ - r.data_offset) {
      return protocol_error(fmt::format("shm: {} has a malformed ring {}", name, i));
    }
  }
  return seg;
}

RingControl* Segment::ring_of(int sender) const {
  auto* rings = reinterpret_cast<RingControl*>(static_cast<char*>(base_) + rings_offset());
  for (std::uint32_t i = 0; i < header()->num_rings; ++i)
    if (rings[i].sender == sender) return &rings[i];
  return nullptr;
}

std::string segment_name(const std::string& job_id, const std::string& key_prefix, int rank) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const unsigned char c : key_prefix) h = (h ^ c) * 16777619u;
  return fmt::format("/{}{:08x}-{}", segment_prefix(job_id), h, rank);
}

namespace detail {
std::atomic<int> barrier_state{kBarrierUnknown};
}  // namespace detail

bool register_sleeper_barrier() {
  int state = detail::barrier_state.load(std::memory_order_acquire);
  if (state == detail::kBarrierUnknown) {
    // A forked child is a new address space, which the kernel has not registered: it asks again.
    // (A static's initializer, not std::call_once, whose thread-local state would make the
    // library need the dynamic loader by name: the .deb's dependency check refuses that.)
    static const bool at_fork = [] {
      return ::pthread_atfork(nullptr, nullptr, [] {
               detail::barrier_state.store(detail::kBarrierUnknown, std::memory_order_release);
             }) == 0;
    }();
    (void)at_fork;
    const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    const bool registered =
        cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
        (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
        ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    state = registered ? detail::kBarrierRegistered : detail::kBarrierRefused;
    detail::barrier_state.store(state, std::memory_order_release);
  }
  return state == detail::kBarrierRegistered;
}

void sleep_fence(const SegmentHeader& own) {
  // The owner set sleeper_barrier from register_sleeper_barrier(), so its peers rely on this call
  // exactly when it can make it. Should it fail all the same, the fence below still orders
  // this side, and a peer's missed ring costs one sleep slice, not a hang.
  if (own.sleeper_barrier != 0 &&
      ::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0) {
    return;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ring_doorbell(SegmentHeader& header, bool force) {
  // Pairs with the sleeper's sleep_fence between raising `sleeping` and re-checking the rings:
  // either it sees the bytes this rank just published, or this rank sees it sleeping.
  publish_fence(header);
  if (!force && header.sleeping.load(std::memory_order_relaxed) == 0) return;
  header.doorbell.fetch_add(1, std::memory_order_release);
  futex(header.doorbell, FUTEX_WAKE, INT32_MAX, nullptr);
}

void sleep_on_doorbell(SegmentHeader& header, std::uint32_t seen, std::int64_t timeout_us) {
  if (timeout_us <= 0) return;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_us / 1000000);
  ts.tv_nsec = static_cast<long>(timeout_us % 1000000) * 1000;
  // EAGAIN (the doorbell moved already), EINTR and ETIMEDOUT all just end the sleep.
  futex(header.doorbell, FUTEX_WAIT, seen, &ts);
}

void post_abort(SegmentHeader& header, int origin, const Status& cause) {
  std::uint32_t expected = kNoAbort;
  if (!header.abort_state.compare_exchange_strong(expected, kAbortWriting,
                                                  std::memory_order_acq_rel)) {
    return;
  }
  const std::string& text = cause.message();
  const std::size_t len = std::min(text.size(), kMaxAbortText);
  std::memcpy(header.abort_text, text.data(), len);
  header.abort_len = static_cast<std::uint32_t>(len);
  header.abort_code = static_cast<std::uint32_t>(cause.code());
  header.abort_origin = origin;
  header.abort_state.store(kAbortWritten, std::memory_order_release);
}

}  // namespace hoop::shm
