// A test Transport that lets the shared conformance bodies (which pass host vectors) run over
// the CUDA IPC transport: every send is copied into a device buffer first and every receive
// lands in one and is copied back to the caller's host buffer when it completes.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "device/device.h"
#include "hoop/transport.h"

namespace hoop::testing {

class DeviceStaged final : public Transport {
 public:
  DeviceStaged(std::unique_ptr<Transport> inner, int device)
      : inner_(std::move(inner)), device_(device) {}

  std::string_view name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts_device_memory() const override { return inner_->accepts_device_memory(); }

  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    HOOP_ASSIGN_OR_RETURN(Staging s, stage(data, bytes, nullptr));
    if (s.buffer.data() != nullptr)
      HOOP_RETURN_IF_ERROR(device::copy(s.buffer.data(), data, bytes));
    HOOP_ASSIGN_OR_RETURN(RequestId id, inner_->send(peer, device_ptr(s, data), bytes));
    staged_[id] = std::move(s);
    return id;
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override {
    HOOP_ASSIGN_OR_RETURN(Staging s, stage(data, bytes, data));
    HOOP_ASSIGN_OR_RETURN(RequestId id, inner_->recv(peer, device_ptr(s, data), bytes));
    staged_[id] = std::move(s);
    return id;
  }
  Status wait(std::span<const RequestId> ids, Deadline deadline) override {
    const Status s = inner_->wait(ids, deadline);
    for (RequestId id : ids) {
      if (s.ok()) (void)unstage(id);
      staged_.erase(id);
    }
    return s;
  }
  Result<bool> test(RequestId id) override {
    Result<bool> r = inner_->test(id);
    if (r.ok() && *r) HOOP_RETURN_IF_ERROR(unstage(id));
    if (!r.ok() || *r) staged_.erase(id);
    return r;
  }
  void poll(std::chrono::microseconds timeout) override { inner_->poll(timeout); }
  void wake() override { inner_->wake(); }
  void abort(const Status& cause) override { inner_->abort(cause); }

 private:
  struct Staging {
    device::Buffer buffer;
    void* host_out = nullptr;  // a receive's destination
    std::size_t bytes = 0;
  };

  /// A device copy of a non-empty, non-null host buffer; nothing for the rest, which the
  /// transport then checks as given.
  Result<Staging> stage(const void* data, std::size_t bytes, void* host_out) {
    Staging s;
    if (data == nullptr || bytes == 0) return s;
    HOOP_ASSIGN_OR_RETURN(s.buffer, device::Buffer::allocate(device_, bytes));
    s.host_out = host_out;
    s.bytes = bytes;
    return s;
  }
  static const void* device_ptr(const Staging& s, const void* data) {
    return s.buffer.data() != nullptr ? s.buffer.data() : data;
  }
  static void* device_ptr(const Staging& s, void* data) {
    return s.buffer.data() != nullptr ? static_cast<void*>(s.buffer.data()) : data;
  }
  Status unstage(RequestId id) {
    auto it = staged_.find(id);
    if (it == staged_.end() || it->second.host_out == nullptr) return Status::success();
    return device::copy(it->second.host_out, it->second.buffer.data(), it->second.bytes);
  }

  std::unique_ptr<Transport> inner_;
  int device_;
  std::map<RequestId, Staging> staged_;
};

}  // namespace hoop::testing
