#include "runtime/coordinator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

namespace hoop::runtime {
namespace {

/// "rank 2" or "ranks 0, 1, 3".
std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

std::string shape_text(const Shape& shape, bool skip_first) {
  std::vector<std::string> dims;
  for (std::size_t i = 0; i < shape.size(); ++i)
    dims.push_back(i == 0 && skip_first ? "*" : std::to_string(shape[i]));
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

/// The fields ranks must agree on, each as text.
struct Field {
  const char* name;
  std::function<std::string(const Request&)> text;
};

std::vector<Field> fields_of(OpType type) {
  const bool skip_first = type == OpType::kAllgather || type == OpType::kAlltoall;
  std::vector<Field> f = {
      {"operation", [](const Request& r) { return std::string(op_type_name(r.type)); }},
      {"dtype", [](const Request& r) { return std::string(dtype_name(r.dtype)); }},
      {"shape", [skip_first](const Request& r) { return shape_text(r.shape, skip_first); }},
      {"device", [](const Request& r) { return std::string(r.device < 0 ? "cpu" : "cuda"); }},
  };
  if (type == OpType::kAllreduce || type == OpType::kReducescatter) {
    f.push_back({"op", [](const Request& r) { return std::string(op_name(r.op)); }});
    f.push_back({"prescale", [](const Request& r) { return fmt::format("{}", r.prescale); }});
    f.push_back({"postscale", [](const Request& r) { return fmt::format("{}", r.postscale); }});
  }
  if (type == OpType::kBroadcast)
    f.push_back({"root", [](const Request& r) { return fmt::format("{}", r.root); }});
  f.push_back({"group", [](const Request& r) {
                 return r.group.empty() ? std::string("none")
                                        : fmt::format("'{}' of {}", r.group, r.group_size);
               }});
  return f;
}

}  // namespace

Status Coordinator::add(int rank, const RequestList& list, Clock::time_point now) {
  if (joined_.empty()) {
    joined_.assign(static_cast<std::size_t>(size_), false);
  }
  // One walk takes the carried inputs and counts the slots; a wrong length is found on the way
  // or at the end (a protocol error, which ends the runtime: what was counted does not matter).
  const std::string_view carried = list.carried;
  if (!list.carries && !carried.empty()) return carried_mismatch(rank, list);
  CarryBudget budget;
  for (std::uint32_t slot : list.cached) {
    const Request* r = cache_.at(slot);
    if (r == nullptr)
      return protocol_error(
          fmt::format("runtime: rank {} named response-cache slot {}, which is empty", rank, slot));
    std::optional<std::string_view> input;
    if (list.carries) {
      const std::size_t at = budget.used();
      if (budget.take(*r)) {
        if (budget.used() > carried.size()) return carried_mismatch(rank, list);
        input = carried.substr(at, r->bytes());
      }
    }
    if (fast_path_open(*r)) {
      HOOP_RETURN_IF_ERROR(add_slot(rank, slot, now, input));
      continue;
    }
    if (auto it = pending_.find(r->name); it != pending_.end() && it->second.by_rank[rank])
      return protocol_error(fmt::format(
          "runtime: rank {} submitted tensor '{}' while it was still pending", rank, r->name));
    add_request(rank, *r, now);
  }
  if (budget.used() != carried.size()) return carried_mismatch(rank, list);
  for (const Request& r : list.requests) {
    if (fast_path_open(r)) {
      // Described in full (by a rank whose cache did not hold it when it sent the list) but
      // the same as a cached tensor: counted with the others that sent the slot.
      if (std::optional<std::uint32_t> slot = cache_.find(r)) {
        HOOP_RETURN_IF_ERROR(add_slot(rank, *slot, now));
        continue;
      }
    }
    // Ranks that sent the slot must meet this description in the full table, where a
    // disagreement is found and named.
    if (std::optional<std::uint32_t> slot = cache_.slot_of(r.name)) demote(*slot);
    if (auto it = pending_.find(r.name); it != pending_.end() && it->second.by_rank[rank])
      return protocol_error(fmt::format(
          "runtime: rank {} submitted tensor '{}' while it was still pending", rank, r.name));
    add_request(rank, r, now);
  }
  if (list.join && !joined_[rank]) {
    joined_[rank] = true;
    ++joined_count_;
    last_joined_ = rank;
  }
  if (list.shutdown && shutdown_by_ < 0) shutdown_by_ = rank;
  // A joined rank changes what "ready" means and a shutdown fails what cannot run: both are
  // the full table's business, also for the slots counted above.
  if (joined_count_ > 0 || list.shutdown) demote_all();
  collect_ready();
  if (joined_count_ == size_) {
    join_done_ = true;
    joined_.assign(static_cast<std::size_t>(size_), false);
    joined_count_ = 0;
  }
  return Status::success();
}

Status Coordinator::carried_mismatch(int rank, const RequestList& list) const {
  CarryBudget budget;
  for (std::uint32_t slot : list.cached) {
    const Request* r = cache_.at(slot);
    if (list.carries && r != nullptr) budget.take(*r);
  }
  return protocol_error(fmt::format(
      "runtime: rank {} sent {} bytes of small tensors' inputs where its list calls for {}", rank,
      list.carried.size(), budget.used()));
}

bool Coordinator::fast_path_open(const Request& r) const {
  // The full table is empty in a steady training loop: no lookup of the name then.
  return joined_count_ == 0 && r.group_size <= 1 &&
         (pending_.empty() || !pending_.contains(r.name));
}

Status Coordinator::add_slot(int rank, std::uint32_t slot, Clock::time_point now,
                             std::optional<std::string_view> input) {
  if (slot >= slots_.size()) slots_.resize(static_cast<std::size_t>(slot) + 1);
  SlotWait& w = slots_[slot];
  if (w.by_rank.empty()) w.by_rank.assign(static_cast<std::size_t>(size_), false);
  if (w.by_rank[rank])
    return protocol_error(
        fmt::format("runtime: rank {} submitted tensor '{}' while it was still pending", rank,
                    cache_.at(slot)->name));
  if (w.count == 0) {
    w.first_seen = w.last_report = now;
    w.carried = 0;
    ++waiting_slots_;
  }
  w.by_rank[rank] = true;
  ++fast_path_tensors_;
  if (input) {
    w.inputs.resize(input->size() * static_cast<std::size_t>(size_));
    std::memcpy(w.inputs.data() + input->size() * static_cast<std::size_t>(rank), input->data(),
                input->size());
    ++w.carried;
  }
  if (++w.count < size_) return Status::success();
  // Every rank sent the same slot, so they agree on every field: nothing to validate.
  if (w.carried == size_) {
    if (carried_used_ == carried_.size()) carried_.emplace_back();
    carried_[carried_used_].assign(w.inputs);
    ready_.push_back(Ready{slot, carried_used_++, true});
  } else {
    ready_.push_back(Ready{slot});
  }
  w.by_rank.assign(w.by_rank.size(), false);
  w.count = 0;
  --waiting_slots_;
  return Status::success();
}

void Coordinator::demote(std::uint32_t slot) {
  if (slot >= slots_.size() || slots_[slot].count == 0) return;
  SlotWait& w = slots_[slot];
  for (int r = 0; r < size_; ++r) {
    if (!w.by_rank[r]) continue;
    add_request(r, *cache_.at(slot), w.first_seen);
    w.by_rank[r] = false;
  }
  w.count = 0;
  --waiting_slots_;
}

void Coordinator::demote_all() {
  for (std::uint32_t s = 0; waiting_slots_ > 0 && s < slots_.size(); ++s) demote(s);
}

void Coordinator::add_request(int rank, Request r, Clock::time_point now) {
  auto [it, fresh] = pending_.try_emplace(r.name);
  Pending& p = it->second;
  if (fresh) {
    p.by_rank.resize(static_cast<std::size_t>(size_));
    p.first_seen = now;
    p.last_report = now;
    arrival_.push_back(r.name);
  }
  p.by_rank[rank] = std::move(r);
  ++p.submitted;
}

bool Coordinator::is_ready(const Pending& p) const {
  for (int r = 0; r < size_; ++r)
    if (!p.by_rank[r] && !joined_[r]) return false;
  return true;
}

std::vector<std::int32_t> Coordinator::joined_ranks() const {
  std::vector<std::int32_t> out;
  for (int r = 0; r < size_; ++r)
    if (joined_[r]) out.push_back(r);
  return out;
}

Response Coordinator::make_response(const std::string& name, Pending& p) const {
  Response resp;
  int first = 0;
  while (!p.by_rank[first]) ++first;
  const Request& ref = *p.by_rank[first];
  resp.type = ref.type;
  resp.tensors.push_back(std::make_shared<const Request>(ref));
  resp.joined = joined_ranks();
  // Agreement is the common case; only a disagreement is worth describing field by field.
  const bool agree = std::all_of(p.by_rank.begin(), p.by_rank.end(), [&](const auto& q) {
    return !q || same_description(*q, ref, /*skip_first_dim=*/true);
  });
  // The first field on which some rank differs from the first submitter, with every value.
  for (const Field& f : agree ? std::vector<Field>{} : fields_of(ref.type)) {
    std::vector<std::pair<std::string, std::vector<int>>> values;
    for (int r = 0; r < size_; ++r) {
      if (!p.by_rank[r]) continue;
      const std::string v = f.text(*p.by_rank[r]);
      auto it = std::find_if(values.begin(), values.end(), [&](auto& e) { return e.first == v; });
      if (it == values.end()) {
        values.push_back({v, {r}});
      } else {
        it->second.push_back(r);
      }
    }
    if (values.size() > 1) {
      std::vector<std::string> parts;
      for (auto& [v, ranks] : values) parts.push_back(fmt::format("{} on {}", v, rank_list(ranks)));
      resp.error = fmt::format("tensor '{}': ranks disagree on the {}: {}", name, f.name,
                               fmt::join(parts, "; "));
      return resp;
    }
  }
  // Only an allreduce can take a joined rank's part (zeros), as in Horovod.
  if (!resp.joined.empty() && ref.type != OpType::kAllreduce) {
    std::vector<int> joined(resp.joined.begin(), resp.joined.end());
    resp.error = fmt::format("tensor '{}': {} needs every rank, but {} joined", name,
                             op_type_name(ref.type), rank_list(joined));
    return resp;
  }
  if (ref.type == OpType::kAllgather) {
    for (int r = 0; r < size_; ++r) {
      const auto& q = p.by_rank[r];
      resp.first_dims.push_back(q && !q->shape.empty() ? q->shape[0] : 0);
    }
  }
  return resp;
}

void Coordinator::collect_ready() {
  std::vector<std::string> still;
  for (const std::string& name : arrival_) {
    auto it = pending_.find(name);
    if (!is_ready(it->second)) {
      still.push_back(name);
      continue;
    }
    Response resp = make_response(name, it->second);
    pending_.erase(it);
    const Request& t = *resp.tensors.front();
    if (t.group_size <= 1 || !resp.error.empty()) {
      push_full(std::move(resp));
      continue;
    }
    // A group runs only once all its members are ready, so that they are fused together.
    std::vector<Response>& members = groups_[t.group];
    const std::uint32_t want = t.group_size;
    const std::string group = t.group;
    members.push_back(std::move(resp));
    if (members.size() == want) {
      for (Response& m : members) push_full(std::move(m));
      groups_.erase(group);
    }
  }
  arrival_ = std::move(still);
  if (shutdown_by_ >= 0) {
    // Nothing can become ready any more: one rank's shutdown ends the runtime on every rank.
    for (const std::string& name : arrival_) {
      Pending& p = pending_[name];
      Response resp = make_response(name, p);
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!p.by_rank[r]) missing.push_back(r);
      resp.error = fmt::format("tensor '{}': rank {} shut down the job before {} submitted it",
                               name, shutdown_by_, rank_list(missing));
      push_full(std::move(resp));
    }
    pending_.clear();
    arrival_.clear();
  }
}

bool Coordinator::has_ready() const {
  return !ready_.empty() || join_done_ || shutdown_by_ >= 0;
}

void Coordinator::take_ready(ResponseList& out) {
  out.clear();
  // Ready allreduces fuse with the open response of their kind (dtype, op, device, scales,
  // joined ranks) while it has room; responses keep the order of their first tensor. There
  // are few kinds at once, so a linear search beats any keyed container here.
  struct Open {
    std::size_t index;
    std::size_t bytes;
  };
  std::vector<Open> open;
  // Whether tensor `t` fuses with response `into`, whose joined ranks are `joined`.
  auto same_kind = [](const Response& into, const Request& t,
                      const std::vector<std::int32_t>& joined) {
    const Request& x = *into.tensors.front();
    return x.dtype == t.dtype && x.op == t.op && x.device == t.device && x.prescale == t.prescale &&
           x.postscale == t.postscale && into.joined == joined;
  };
  static const std::vector<std::int32_t> kNobody;
  for (const Ready& ready : ready_) {
    const bool slotted = ready.slot != kNoSlot;
    Response* full = slotted ? nullptr : &full_[ready.index];
    const std::shared_ptr<const Request>& shared =
        slotted ? cache_.shared(ready.slot) : full->tensors.front();
    const Request& t = *shared;
    const OpType type = slotted ? t.type : full->type;
    // A slot's tensor was counted only while nobody had joined.
    const std::vector<std::int32_t>& joined = slotted ? kNobody : full->joined;
    // The response this tensor makes on its own, added to `out`.
    auto alone = [&]() -> Response& {
      Response& r = out.responses.add();
      if (!slotted) {
        r = std::move(*full);
        return r;
      }
      r.type = type;
      r.tensors.push_back(shared);
      r.slots.push_back(ready.slot);
      return r;
    };
    if (ready.carried) {
      // Reduced by every rank from the inputs at hand: nothing to fuse it with.
      Response& r = alone();
      r.carried = true;
      // Swapped, not copied: carried_ keeps the emptied string's room for a later round.
      r.inputs.swap(carried_[ready.index]);
      ++carried_responses_;
      continue;
    }
    const std::size_t b = t.bytes();
    // Adasum's coefficients come from each tensor's own dot product and norms: never fused.
    if (type != OpType::kAllreduce || (!slotted && !full->error.empty()) ||
        fusion_threshold_ == 0 || t.op == ReduceOp::kAdasum) {
      alone();
      continue;
    }
    auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) {
      return same_kind(out.responses[o.index], t, joined);
    });
    if (it != open.end() && it->bytes + b <= fusion_threshold_) {
      Response& fused = out.responses[it->index];
      // Slots stay one per tensor once any tensor of the response has one.
      if (slotted || !fused.slots.empty()) {
        fused.slots.resize(fused.tensors.size(), kNoSlot);
        fused.slots.push_back(ready.slot);
      }
      fused.tensors.push_back(shared);
      it->bytes += b;
      continue;
    }
    if (it != open.end()) open.erase(it);
    open.push_back(Open{out.responses.size(), b});
    alone();
  }
  ready_.clear();
  full_.clear();
  carried_used_ = 0;
  // Only the autotuner sets an algorithm; kAuto is every response's default already.
  if (algorithm_ != Algorithm::kAuto) {
    for (Response& r : out.responses)
      if (r.type == OpType::kAllreduce && r.tensors.front()->op != ReduceOp::kAdasum)
        r.algorithm = algorithm_;
  }
  if (join_done_) {
    out.join_done_last = last_joined_;
    join_done_ = false;
  }
  out.shutdown = shutdown_by_ >= 0;
  out.shutdown_by = shutdown_by_;
}

std::string Coordinator::stall_line(const std::string& name, OpType type,
                                    const std::vector<bool>& have, Clock::time_point first_seen,
                                    Clock::time_point now) const {
  std::vector<int> submitted;
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (have[r]) {
      submitted.push_back(r);
    } else if (!joined_[r]) {
      missing.push_back(r);
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - first_seen);
  return fmt::format("tensor '{}' ({}) submitted by {} {} s ago; waiting for {}", name,
                     op_type_name(type), rank_list(submitted), waited.count(), rank_list(missing));
}

std::vector<std::string> Coordinator::stalled(Clock::time_point now,
                                              std::chrono::milliseconds after) {
  std::vector<std::string> lines;
  for (const std::string& name : arrival_) {
    Pending& p = pending_[name];
    if (now - p.last_report < after) continue;
    p.last_report = now;
    std::vector<bool> have(static_cast<std::size_t>(size_));
    OpType type = OpType::kAllreduce;
    for (int r = 0; r < size_; ++r) {
      if (!p.by_rank[r]) continue;
      have[r] = true;
      type = p.by_rank[r]->type;
    }
    lines.push_back(stall_line(name, type, have, p.first_seen, now));
  }
  for (std::uint32_t s = 0; waiting_slots_ > 0 && s < slots_.size(); ++s) {
    SlotWait& w = slots_[s];
    if (w.count == 0 || now - w.last_report < after) continue;
    w.last_report = now;
    const Request& r = *cache_.at(s);
    lines.push_back(stall_line(r.name, r.type, w.by_rank, w.first_seen, now));
  }
  return lines;
}

bool Coordinator::stalled_longer_than(Clock::time_point now,
                                      std::chrono::milliseconds after) const {
  for (const std::string& name : arrival_)
    if (now - pending_.at(name).first_seen >= after) return true;
  for (const SlotWait& w : slots_)
    if (w.count > 0 && now - w.first_seen >= after) return true;
  return false;
}

}  // namespace hoop::runtime
