#include "runtime/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/reduce.h"
#include "core/scale.h"

namespace hoop::runtime {
namespace {

/// Elements per first-dimension row.
template <typename Dims>
std::size_t row_elems(const Dims& shape) {
  std::size_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= static_cast<std::size_t>(shape[i]);
  return n;
}

Result<OwnedTensor> make_output(const Request& t, std::int64_t rows, const Memory& mem) {
  OwnedTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape.empty() ? std::vector<std::int64_t>{rows} : t.shape.vec();
  out.shape[0] = rows;
  HOOP_RETURN_IF_ERROR(mem.allocate(
      out, static_cast<std::size_t>(rows) * row_elems(out.shape) * dtype_size(t.dtype)));
  return out;
}

}  // namespace

void Executor::begin(const Response& resp, const char* phase) {
  // The arguments cost a cost-model query and strings per response: only for a timeline.
  if (!timeline_.active()) return;
  std::size_t total = 0;
  for (const auto& t : resp.tensors) total += t->bytes();
  std::vector<std::pair<std::string, std::string>> args = {
      {"bytes", std::to_string(total)},
      {"tensors", std::to_string(resp.tensors.size())},
      {"transport", std::string(comm_.transport().name())}};
  if (resp.carried) {
    args.emplace_back("algorithm", "carried");  // reduced from inputs that came with the round
  } else if (resp.type == OpType::kAllreduce) {
    args.emplace_back("algorithm", std::string(algorithm_name(allreduce_algorithm(comm_, total))));
  }
  for (const auto& t : resp.tensors) timeline_.begin(t->name, phase, args);
}

void Executor::end(const Response& resp) {
  for (const auto& t : resp.tensors) timeline_.end(t->name);
}

Status Executor::run(const Response& resp, const std::vector<Entry*>& entries) {
  algorithm_ = resp.algorithm;
  switch (resp.type) {
    case OpType::kAllreduce:
      return allreduce(resp, entries);
    case OpType::kAllgather:
      return allgather(resp, entries.front());
    case OpType::kBroadcast:
      return broadcast(resp, entries.front());
    case OpType::kAlltoall:
      return alltoall(resp, entries.front());
    case OpType::kReducescatter:
      return reducescatter(resp, entries.front());
    case OpType::kBarrier:
      return hoop::barrier(comm_);
  }
  return internal_error("runtime: unknown operation in a response");
}

Result<Memory> Executor::memory_for(const Response& resp, const std::vector<Entry*>& entries) {
  if (resp.tensors.front()->device == kCpuDevice) return Memory();
  int device = last_device_;
  for (const Entry* e : entries) {
    if (e != nullptr) {
      device = e->input.data != nullptr || e->output.data == nullptr ? e->input.device
                                                                     : e->output.device;
      break;
    }
  }
  if (device == kCpuDevice) device = 0;  // joined before this rank ever used a device
  if (stream_.handle() == nullptr || stream_.device() != device) {
    HOOP_RETURN_IF_ERROR(device::set_device(device));
    HOOP_ASSIGN_OR_RETURN(stream_, device::Stream::create(device));
  }
  last_device_ = device;
  return Memory(device, stream_.handle());
}

Status Executor::reduce_in_place(const Request& t, void* buf, std::size_t count,
                                 const Memory& mem) {
  AllreduceOptions o;
  o.output = buf;
  o.count = count;
  o.dtype = t.dtype;
  // kAvg runs in the communicator, exactly as a direct call would. Joined ranks contribute
  // zeros and count in the divisor, as in Horovod (the average is over the whole set).
  o.op = t.op;
  o.algorithm = algorithm_;
  HOOP_RETURN_IF_ERROR(hoop::allreduce(comm_, o));
  HOOP_RETURN_IF_ERROR(mem.scale_copy(buf, buf, count, t.dtype, t.postscale));
  return mem.sync(deadline());
}

Status Executor::reduce_carried(const Response& resp, Entry* e) {
  const Request& t = *resp.tensors.front();
  const std::size_t bytes = t.bytes();
  const auto n = static_cast<std::size_t>(comm_.size());
  if (resp.inputs.size() != bytes * n)
    return internal_error(fmt::format("runtime: tensor '{}' came with {} bytes of inputs, not {}",
                                      t.name, resp.inputs.size(), bytes * n));
  // A rank joins only after the slots' fast path has closed: a carried tensor has every entry.
  if (e == nullptr) return internal_error("runtime: a carried tensor without this rank's entry");
  carried_.clear();
  for (std::size_t r = 0; r < n; ++r)
    carried_.push_back(reinterpret_cast<const std::byte*>(resp.inputs.data()) + r * bytes);
  begin(resp, "ALLREDUCE");
  // The inputs were prescaled by their senders; the same rank order as the shared-memory path.
  Status s = reduce_in_rank_order(e->output.data, carried_, t.count(), t.dtype, t.op);
  if (s.ok() && t.postscale != 1.0)
    s = scale_copy(e->output.data, e->output.data, t.count(), t.dtype, t.postscale);
  end(resp);
  return s;
}

Status Executor::allreduce(const Response& resp, const std::vector<Entry*>& entries) {
  if (resp.carried) return reduce_carried(resp, entries.front());
  const Request& first = *resp.tensors.front();
  HOOP_ASSIGN_OR_RETURN(Memory mem, memory_for(resp, entries));
  if (resp.tensors.size() == 1 && entries.front() != nullptr) {
    // One tensor: reduced in the caller's output, no fusion copy.
    Entry& e = *entries.front();
    begin(resp, "ALLREDUCE");
    Status s =
        mem.scale_copy(e.output.data, e.input.data, first.count(), first.dtype, first.prescale);
    if (s.ok()) s = mem.sync(deadline());
    if (s.ok()) s = reduce_in_place(first, e.output.data, first.count(), mem);
    end(resp);
    return s;
  }
  std::size_t total = 0;
  bool scaled = false;
  for (const auto& t : resp.tensors) {
    total += t->bytes();
    scaled = scaled || t->prescale != 1.0 || t->postscale != 1.0;
  }
  // Every rank decides alike, from the response: its joined ranks then reduce zeros in the
  // same collective.
  if (!mem.on_device() && !scaled && algorithm_ == Algorithm::kAuto &&
      allreduce_list_reads(comm_, total))
    return allreduce_where_they_lie(resp, entries, total);
  HOOP_ASSIGN_OR_RETURN(std::byte * fusion, fusion_.get(mem, total));
  const std::size_t es = dtype_size(first.dtype);
  // The bytes [lo, hi) of the fusion buffer, to or from the tensors they belong to.
  auto copy_in = [&](std::size_t lo, std::size_t hi) -> Status {
    std::size_t at = 0;
    for (std::size_t i = 0; i < resp.tensors.size() && at < hi; ++i) {
      const Request& t = *resp.tensors[i];
      const std::size_t b = t.bytes();
      const std::size_t from = std::max(lo, at);
      const std::size_t to = std::min(hi, at + b);
      if (from < to) {
        if (entries[i] == nullptr) {
          HOOP_RETURN_IF_ERROR(mem.zero(fusion + from, to - from));  // a joined rank adds nothing
        } else {
          HOOP_RETURN_IF_ERROR(mem.scale_copy(
              fusion + from, static_cast<const std::byte*>(entries[i]->input.data) + (from - at),
              (to - from) / es, t.dtype, t.prescale));
        }
      }
      at += b;
    }
    return Status::success();
  };
  auto copy_out = [&](std::size_t lo, std::size_t hi) -> Status {
    std::size_t at = 0;
    for (std::size_t i = 0; i < resp.tensors.size() && at < hi; ++i) {
      const std::size_t b = resp.tensors[i]->bytes();
      const std::size_t from = std::max(lo, at);
      const std::size_t to = std::min(hi, at + b);
      if (from < to && entries[i] != nullptr)
        HOOP_RETURN_IF_ERROR(
            mem.copy(static_cast<std::byte*>(entries[i]->output.data) + (from - at), fusion + from,
                     to - from));
      at += b;
    }
    return Status::success();
  };
  // Large fused host buffers go through in chunks: while the collective runs on chunk k, the
  // copy worker copies chunk k + 1 in and chunk k - 1 out. On a device the copies run at
  // memory speed beside a collective that moves the same bytes over a link, so there is
  // nothing worth overlapping.
  const bool chunked = total >= kPipelineMinBytes && !mem.on_device();
  const std::size_t chunk =
      chunked ? std::max(kPipelineChunkBytes / es, std::size_t{1}) * es : total;
  const std::size_t chunks = chunk == 0 ? 1 : (total + chunk - 1) / chunk;
  begin(resp, "MEMCPY_IN_FUSION_BUFFER");
  Status s = copy_in(0, std::min(chunk, total));
  if (s.ok()) s = mem.sync(deadline());
  end(resp);
  HOOP_RETURN_IF_ERROR(s);
  begin(resp, "ALLREDUCE");
  for (std::size_t k = 0; k < chunks && s.ok(); ++k) {
    const std::size_t lo = k * chunk;
    const std::size_t hi = std::min(total, lo + chunk);
    const bool overlap = chunks > 1;
    if (overlap) {
      copier_.start([&, k, lo, hi]() -> Status {
        if (k > 0) HOOP_RETURN_IF_ERROR(copy_out(lo - chunk, lo));
        return k + 1 < chunks ? copy_in(hi, std::min(total, hi + chunk)) : Status::success();
      });
    }
    s = reduce_in_place(first, fusion + lo, (hi - lo) / es, mem);
    if (overlap) {
      const Status copied = copier_.finish();
      if (s.ok()) s = copied;
    }
  }
  end(resp);
  HOOP_RETURN_IF_ERROR(s);
  begin(resp, "MEMCPY_OUT_FUSION_BUFFER");
  const std::size_t last = chunks > 0 ? (chunks - 1) * chunk : 0;
  s = copy_out(last, total);
  if (s.ok()) s = mem.sync(deadline());
  end(resp);
  return s;
}

Status Executor::allreduce_where_they_lie(const Response& resp,
                                          const std::vector<Entry*>& entries,
                                          std::size_t total) {
  std::vector<AllreduceBuffer> list(resp.tensors.size());
  std::byte* zeros = nullptr;  // a joined rank's stand-ins, in the fusion buffer
  std::size_t at = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::size_t b = resp.tensors[i]->bytes();
    list[i].count = resp.tensors[i]->count();
    if (entries[i] != nullptr) {
      list[i].input = entries[i]->input.data;
      list[i].output = entries[i]->output.data;
    } else {
      if (zeros == nullptr) {
        HOOP_ASSIGN_OR_RETURN(zeros, fusion_.get(Memory(), total));
      }
      std::memset(zeros + at, 0, b);
      list[i].output = zeros + at;
    }
    at += b;
  }
  AllreduceListOptions o;
  o.buffers = list;
  o.dtype = resp.tensors.front()->dtype;
  o.op = resp.tensors.front()->op;
  begin(resp, "ALLREDUCE");
  Status s = allreduce_list(comm_, o);
  end(resp);
  return s;
}

CopyWorker::~CopyWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CopyWorker::start(std::function<Status()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    job_ = std::move(job);
    done_ = false;
  }
  cv_.notify_all();
}

Status CopyWorker::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

void CopyWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || job_ != nullptr; });
    if (stop_) return;
    std::function<Status()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    Status s = job();
    lock.lock();
    result_ = s;
    done_ = true;
    cv_.notify_all();
  }
}

Status Executor::allgather(const Response& resp, Entry* e) {
  const Request& t = *resp.tensors.front();
  const std::size_t row = row_elems(t.shape);
  std::vector<std::size_t> counts;
  std::int64_t rows = 0;
  for (std::int64_t d : resp.first_dims) {
    counts.push_back(static_cast<std::size_t>(d) * row);
    rows += d;
  }
  HOOP_ASSIGN_OR_RETURN(Memory mem, memory_for(resp, {e}));
  HOOP_ASSIGN_OR_RETURN(OwnedTensor out, make_output(t, rows, mem));
  begin(resp, "ALLGATHER");
  AllgathervOptions o;
  o.input = e != nullptr ? e->input.data : nullptr;
  o.output = out.data();
  o.counts = counts;
  o.dtype = t.dtype;
  Status s = hoop::allgatherv(comm_, o);
  end(resp);
  if (s.ok() && e != nullptr) e->handle->output = std::move(out);
  return s;
}

Status Executor::broadcast(const Response& resp, Entry* e) {
  const Request& t = *resp.tensors.front();
  begin(resp, "BROADCAST");
  BroadcastOptions o;
  o.buffer = e->output.data;
  o.count = t.count();
  o.dtype = t.dtype;
  o.root = t.root;
  Status s = hoop::broadcast(comm_, o);
  end(resp);
  return s;
}

Status Executor::alltoall(const Response& resp, Entry* e) {
  const Request& t = *resp.tensors.front();
  const int n = comm_.size();
  const std::size_t row = row_elems(t.shape);
  // This rank's own row count: the negotiated description is the first rank's, and the ranks'
  // first dimensions may differ.
  const std::int64_t rows = e->request.shape.front();  // alltoall_async made a scalar {1}
  std::vector<std::int64_t> send_rows = e->splits;
  if (send_rows.empty()) send_rows.assign(static_cast<std::size_t>(n), rows / n);
  // Every rank learns how many rows it gets from each rank before the data moves.
  std::vector<std::int64_t> recv_rows(static_cast<std::size_t>(n));
  begin(resp, "ALLTOALL");
  AlltoallOptions counts;
  counts.input = send_rows.data();
  counts.output = recv_rows.data();
  counts.count = 1;
  counts.dtype = DataType::kI64;
  Status s = hoop::alltoall(comm_, counts);
  if (!s.ok()) {
    end(resp);
    return s;
  }
  std::vector<std::size_t> send_counts;
  std::vector<std::size_t> recv_counts;
  std::int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    send_counts.push_back(static_cast<std::size_t>(send_rows[r]) * row);
    recv_counts.push_back(static_cast<std::size_t>(recv_rows[r]) * row);
    total += recv_rows[r];
  }
  Result<Memory> mem = memory_for(resp, {e});
  Result<OwnedTensor> made = mem.ok() ? make_output(t, total, *mem) : mem.status();
  if (!made.ok()) {
    end(resp);
    return made.status();
  }
  OwnedTensor out = std::move(*made);
  AlltoallvOptions o;
  o.input = e->input.data;
  o.send_counts = send_counts;
  o.output = out.data();
  o.recv_counts = recv_counts;
  o.dtype = t.dtype;
  s = hoop::alltoallv(comm_, o);
  end(resp);
  if (s.ok()) {
    e->handle->output = std::move(out);
    e->handle->received_splits = std::move(recv_rows);
  }
  return s;
}

Status Executor::reducescatter(const Response& resp, Entry* e) {
  const Request& t = *resp.tensors.front();
  const int n = comm_.size();
  const int me = comm_.rank();
  const std::size_t row = row_elems(t.shape);
  const std::int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const std::size_t es = dtype_size(t.dtype);
  HOOP_ASSIGN_OR_RETURN(Memory mem, memory_for(resp, {e}));
  // Rank r's share: rows / n rows, one more for the first rows % n ranks. The communicator's
  // reduce-scatter takes equal blocks, so every share is padded to the largest.
  auto share = [&](int r) { return rows / n + (r < rows % n ? 1 : 0); };
  const std::size_t block = static_cast<std::size_t>(share(0)) * row;
  const std::size_t padded_bytes = block * static_cast<std::size_t>(n) * es;
  HOOP_ASSIGN_OR_RETURN(std::byte * padded, scratch_.get(mem, padded_bytes + block * es));
  std::byte* mine = padded + padded_bytes;
  HOOP_RETURN_IF_ERROR(mem.zero(padded, padded_bytes));
  std::size_t from = 0;
  for (int r = 0; r < n; ++r) {
    const std::size_t elems = static_cast<std::size_t>(share(r)) * row;
    HOOP_RETURN_IF_ERROR(mem.scale_copy(padded + block * static_cast<std::size_t>(r) * es,
                                        static_cast<const std::byte*>(e->input.data) + from * es,
                                        elems, t.dtype, t.prescale));
    from += elems;
  }
  HOOP_RETURN_IF_ERROR(mem.sync(deadline()));
  begin(resp, "REDUCESCATTER");
  ReduceScatterOptions o;
  o.input = padded;
  o.output = mine;
  o.count = block;
  o.dtype = t.dtype;
  o.op = t.op;
  Status s = hoop::reduce_scatter(comm_, o);
  end(resp);
  HOOP_RETURN_IF_ERROR(s);
  HOOP_ASSIGN_OR_RETURN(OwnedTensor out, make_output(t, share(me), mem));
  const std::size_t elems = static_cast<std::size_t>(share(me)) * row;
  HOOP_RETURN_IF_ERROR(mem.scale_copy(out.data(), mine, elems, t.dtype, t.postscale));
  HOOP_RETURN_IF_ERROR(mem.sync(deadline()));
  e->handle->output = std::move(out);
  return Status::success();
}

}  // namespace hoop::runtime
