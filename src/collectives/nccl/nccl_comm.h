// One rank's NCCL communicator, created non-blocking so that no NCCL call can hang the caller:
// every wait (the job's ranks joining, a collective being queued, a collective finishing) polls
// and gives up at a deadline, after which the owner aborts the communicator.
#pragma once

#include <nccl.h>

#include <memory>
#include <string_view>

#include "collectives/algorithms/device_path.h"
#include "device/device.h"
#include "hoop/transport.h"

namespace hoop::nccl {

class Comm {
 public:
  /// Joins the job's NCCL communicator; called collectively by every rank. Rank 0 makes NCCL's
  /// unique id and publishes it in the store under `setup.key_prefix` + "/id", the other ranks
  /// read it there (a 1-rank job needs no store). Creating the communicator is polled until
  /// setup.timeout: timeout_error naming the wait (and the communicator aborted) when the ranks
  /// have not all joined by then.
  static Result<std::unique_ptr<Comm>> create(const collectives::DeviceBackendSetup& setup);
  /// Finalizes and destroys a healthy communicator (bounded by the timeout, aborting when that
  /// fails); one that was aborted is already gone.
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// The communicator; null after abort().
  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  /// Waits until the NCCL call just made, which returned `issued`, is queued: a non-blocking
  /// communicator may answer ncclInProgress and finish queueing in the background. The error
  /// names `call` and this rank; timeout_error at `deadline`.
  Status queued(ncclResult_t issued, std::string_view call, Deadline deadline);
  /// Waits until everything queued on `stream` (a cudaStream_t) has finished, watching the
  /// communicator's asynchronous error meanwhile (a peer lost mid-collective shows there, while
  /// the stream would wait forever). timeout_error naming `call` at `deadline`.
  Status finished(void* stream, std::string_view call, Deadline deadline);
  /// Aborts the communicator (ends its work on every stream and frees it); idempotent.
  void abort();

 private:
  Comm(ncclComm_t comm, int rank, int size, int device, std::chrono::milliseconds timeout,
       device::Event done)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout),
        done_(std::move(done)) {}

  ncclComm_t comm_;
  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  device::Event done_;  // recorded after each collective: finished() queries it
};

}  // namespace hoop::nccl
