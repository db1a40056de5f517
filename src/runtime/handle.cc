// The runtime's value types (hoop/hoop.h): Tensor, OwnedTensor, and Handle, whose wait runs
// its process set's work on the waiting thread (handle_state.h's Driver) before it sleeps.
#include <sched.h>

#include <chrono>
#include <cstring>
#include <utility>

#include "device/device.h"
#include "hoop/hoop.h"
#include "runtime/handle_state.h"

namespace hoop {
namespace {

// How long a waiting thread drives or spins before it sleeps on the handle's condition.
constexpr std::chrono::microseconds kHandleSpin{100};

}  // namespace

std::size_t Tensor::count() const {
  std::size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t Tensor::bytes() const { return count() * dtype_size(dtype); }

std::byte* OwnedTensor::data() {
  return device == kCpuDevice ? storage.data() : device_storage.get();
}

Tensor OwnedTensor::view() { return Tensor{data(), dtype, shape, device}; }

void OwnedTensor::copy_to(void* dst) const {
  if (device == kCpuDevice) {
    if (!storage.empty()) std::memcpy(dst, storage.data(), storage.size());
    return;
  }
  const Status s = device::copy(dst, device_storage.get(), Tensor{nullptr, dtype, shape}.bytes());
  if (!s.ok()) throw Error(s);
}

bool Handle::poll() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

Status Handle::status() const {
  if (!state_) return invalid_argument("an empty hoop::Handle");
  // Finished already (a step's other handles once the first wait has run the step): no clock,
  // no counter, no lock. A 400-tensor step's waits after its round took 50-60 us, now 25-45.
  if (state_->finished.load(std::memory_order_acquire)) return state_->status;
  // Small operations finish within tens of microseconds; polling that long, yielding the core,
  // saves the wake-up of a sleep on the condition variable.
  detail::waiting_threads.fetch_add(1, std::memory_order_acq_rel);
  struct Unwait {
    ~Unwait() { detail::waiting_threads.fetch_sub(1, std::memory_order_acq_rel); }
  } unwait;
  const auto spin_end = std::chrono::steady_clock::now() + kHandleSpin;
  // Runs the set's negotiation and collectives on this thread while it would spin anyway.
  const bool drove = state_->driver != nullptr && !state_->finished.load(std::memory_order_acquire);
  if (drove) state_->driver->drive(state_->finished, spin_end);
  while (!state_->finished.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < spin_end)
    ::sched_yield();
  if (drove && !state_->finished.load(std::memory_order_acquire)) state_->driver->stop_driving();
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

void Handle::wait() const {
  Status s = status();
  if (!s.ok()) throw Error(std::move(s));
}

OwnedTensor& Handle::output() const {
  if (!state_) throw Error(invalid_argument("an empty hoop::Handle"));
  return state_->output;
}

const std::vector<std::int64_t>& Handle::received_splits() const {
  if (!state_) throw Error(invalid_argument("an empty hoop::Handle"));
  return state_->received_splits;
}

void Handle::on_done(std::function<void(const Status&)> callback) const {
  if (!state_) throw Error(invalid_argument("an empty hoop::Handle"));
  Status outcome;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->done) {
      state_->on_done = std::move(callback);
      callback = nullptr;
    } else {
      outcome = state_->status;
    }
  }
  if (callback) {
    callback(outcome);
  } else if (state_->driver != nullptr) {
    // Outside the handle's lock: the controller's own lock comes next.
    state_->driver->hand_over();
  }
}

int Handle::last_joined_rank() const {
  if (!state_) throw Error(invalid_argument("an empty hoop::Handle"));
  return state_->last_joined;
}

}  // namespace hoop
