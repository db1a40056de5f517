#include "collectives/nccl/nccl_comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "collectives/nccl/nccl_types.h"
#include "core/log.h"

namespace hoop::nccl {
namespace {

/// Calls `step` until it reports done (true) or fails; false when `deadline` passes first. Yields
/// first, then sleeps with doubling pauses up to 1 ms: short waits end within microseconds and
/// long ones do not hold a core that the rank's other threads need.
Result<bool> poll(Deadline deadline, const std::function<Result<bool>()>& step) {
  constexpr int kYields = 64;
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  auto sleep = std::chrono::microseconds(10);
  for (int polls = 0;; ++polls) {
    HOOP_ASSIGN_OR_RETURN(const bool done, step());
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    if (polls < kYields) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

/// NCCL's unique id of this job: made by rank 0, shared through the store with the others.
Result<ncclUniqueId> unique_id(const collectives::DeviceBackendSetup& s) {
  ncclUniqueId id{};
  const std::string key = s.key_prefix + "/id";
  if (s.rank == 0) {
    HOOP_RETURN_IF_ERROR(nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId", s.rank, nullptr));
    if (s.size > 1)
      HOOP_RETURN_IF_ERROR(s.store->set(key, std::string_view(id.internal, sizeof id.internal)));
    return id;
  }
  Result<std::string> value = s.store->wait_get(key, s.timeout);
  if (!value.ok())
    return value.status().with_context(
        fmt::format("nccl: rank {} waiting for rank 0's NCCL id (store key {})", s.rank, key));
  if (value->size() != sizeof id.internal)
    return protocol_error(
        fmt::format("nccl: store key {} holds {} bytes where rank 0 publishes its {}-byte NCCL id",
                    key, value->size(), sizeof id.internal));
  std::memcpy(id.internal, value->data(), sizeof id.internal);
  return id;
}

}  // namespace

Result<std::unique_ptr<Comm>> Comm::create(const collectives::DeviceBackendSetup& s) {
  const Deadline deadline = Clock::now() + s.timeout;
  if (s.size > 1 && s.store == nullptr)
    return invalid_argument(fmt::format(
        "nccl: the {} ranks of this job share NCCL's id through the rendezvous store, and there "
        "is none",
        s.size));
  // The id first: a rank whose device fails still lets the others fail at their own deadline.
  HOOP_ASSIGN_OR_RETURN(const ncclUniqueId id, unique_id(s));
  HOOP_RETURN_IF_ERROR(device::set_device(s.device));
  HOOP_ASSIGN_OR_RETURN(device::Event done, device::Event::create(s.device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every NCCL call returns at once; hoop polls with its deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, s.size, id, s.rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    Status failed = nccl_status(started, "ncclCommInitRankConfig", s.rank, comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return failed;
  }
  std::unique_ptr<Comm> self(new Comm(comm, s.rank, s.size, s.device, s.timeout, std::move(done)));
  Status joined = self->queued(started, "ncclCommInitRankConfig", deadline);
  if (!joined.ok()) {
    self->abort();
    return joined.with_context(fmt::format(
        "nccl: rank {} of {} on cuda:{} joining the job's NCCL communicator (every rank joins "
        "at its first device collective)",
        s.rank, s.size, s.device));
  }
  return self;
}

Comm::~Comm() {
  if (comm_ == nullptr) return;
  (void)device::set_device(device_);
  const Status finalized =
      queued(ncclCommFinalize(comm_), "ncclCommFinalize", Clock::now() + timeout_);
  if (finalized.ok()) {
    const ncclResult_t destroyed = ncclCommDestroy(comm_);
    if (destroyed != ncclSuccess)
      HOOP_LOG(kWarn, "{}", nccl_status(destroyed, "ncclCommDestroy", rank_, nullptr).to_string());
    comm_ = nullptr;
    return;
  }
  HOOP_LOG(kWarn, "{}; aborting the NCCL communicator instead", finalized.to_string());
  abort();
}

Status Comm::queued(ncclResult_t issued, std::string_view call, Deadline deadline) {
  if (comm_ == nullptr) return aborted(fmt::format("{}: the NCCL communicator was aborted", call));
  if (issued != ncclSuccess && issued != ncclInProgress)
    return nccl_status(issued, call, rank_, comm_);
  ncclResult_t state = issued;
  HOOP_ASSIGN_OR_RETURN(const bool settled, poll(deadline, [&]() -> Result<bool> {
                          const ncclResult_t got = ncclCommGetAsyncError(comm_, &state);
                          if (got != ncclSuccess)
                            return nccl_status(got, "ncclCommGetAsyncError", rank_, comm_);
                          return state != ncclInProgress;
                        }));
  if (!settled)
    return timeout_error(
        fmt::format("{} on rank {} of {} (cuda:{}) was still in progress after {} ms", call, rank_,
                    size_, device_, timeout_.count()));
  return nccl_status(state, call, rank_, comm_);
}

Status Comm::finished(void* stream, std::string_view call, Deadline deadline) {
  if (comm_ == nullptr) return aborted(fmt::format("{}: the NCCL communicator was aborted", call));
  HOOP_RETURN_IF_ERROR(done_.record(stream));
  HOOP_ASSIGN_OR_RETURN(const bool done, poll(deadline, [&]() -> Result<bool> {
                          ncclResult_t state = ncclSuccess;
                          const ncclResult_t got = ncclCommGetAsyncError(comm_, &state);
                          if (got != ncclSuccess)
                            return nccl_status(got, "ncclCommGetAsyncError", rank_, comm_);
                          if (state != ncclSuccess && state != ncclInProgress)
                            return nccl_status(state, call, rank_, comm_);
                          return done_.query();
                        }));
  if (!done)
    return timeout_error(fmt::format(
        "{} on rank {} of {} (cuda:{}) had not finished on the device after {} ms (a rank that "
        "never called it, or one that died)",
        call, rank_, size_, device_, timeout_.count()));
  return Status::success();
}

void Comm::abort() {
  if (comm_ == nullptr) return;
  (void)device::set_device(device_);
  // The communicator is gone whatever NCCL answers; a failure to abort only leaks it.
  const ncclResult_t result = ncclCommAbort(comm_);
  if (result != ncclSuccess)
    HOOP_LOG(kWarn, "{}", nccl_status(result, "ncclCommAbort", rank_, nullptr).to_string());
  comm_ = nullptr;
}

}  // namespace hoop::nccl
