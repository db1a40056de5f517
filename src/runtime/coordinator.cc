#include "runtime/coordinator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

namespace hoop::runtime {
namespace {

bool cacheable(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kBroadcast || t == OpType::kReducescatter;
}

/// "rank 2" or "ranks 0, 1, 3".
std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

std::string shape_text(const std::vector<std::int64_t>& shape, bool skip_first) {
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
      {"device",
       [](const Request& r) { return r.device < 0 ? "cpu" : fmt::format("cuda:{}", r.device); }},
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

std::optional<std::uint32_t> ResponseCache::find(const Request& r) const {
  auto it = by_name_.find(r.name);
  if (it == by_name_.end() || !same_description(slots_[it->second], r)) return std::nullopt;
  return it->second;
}

const Request* ResponseCache::at(std::uint32_t slot) const {
  return slot < slots_.size() ? &slots_[slot] : nullptr;
}

void ResponseCache::put(const Request& r) {
  if (!cacheable(r.type)) return;
  if (auto it = by_name_.find(r.name); it != by_name_.end()) {
    slots_[it->second] = r;
    return;
  }
  if (slots_.size() >= capacity_) return;
  by_name_.emplace(r.name, static_cast<std::uint32_t>(slots_.size()));
  slots_.push_back(r);
}

Status Coordinator::add(int rank, const RequestList& list, Clock::time_point now) {
  if (joined_.empty()) {
    joined_.assign(static_cast<std::size_t>(size_), false);
    shutting_down_.assign(static_cast<std::size_t>(size_), false);
  }
  for (std::uint32_t slot : list.cached) {
    const Request* r = cache_.at(slot);
    if (r == nullptr)
      return protocol_error(
          fmt::format("runtime: rank {} named response-cache slot {}, which is empty", rank, slot));
    if (pending_.contains(r->name) && pending_[r->name].by_rank[rank])
      return protocol_error(fmt::format(
          "runtime: rank {} submitted tensor '{}' while it was still pending", rank, r->name));
    add_request(rank, *r, now);
  }
  for (const Request& r : list.requests) {
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
  if (list.shutdown && !shutting_down_[rank]) {
    shutting_down_[rank] = true;
    ++shutdown_count_;
  }
  collect_ready();
  if (joined_count_ == size_) {
    join_done_ = true;
    joined_.assign(static_cast<std::size_t>(size_), false);
    joined_count_ = 0;
  }
  return Status::success();
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
  resp.tensors.push_back(ref);
  resp.joined = joined_ranks();
  // The first field on which some rank differs from the first submitter, with every value.
  for (const Field& f : fields_of(ref.type)) {
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
  if (!resp.joined.empty() && ref.type != OpType::kAllreduce && ref.type != OpType::kAllgather) {
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
    const Request& t = resp.tensors.front();
    if (t.group_size <= 1 || !resp.error.empty()) {
      ready_.push_back(std::move(resp));
      continue;
    }
    // A group runs only once all its members are ready, so that they are fused together.
    std::vector<Response>& members = groups_[t.group];
    const std::uint32_t want = t.group_size;
    const std::string group = t.group;
    members.push_back(std::move(resp));
    if (members.size() == want) {
      for (Response& m : members) ready_.push_back(std::move(m));
      groups_.erase(group);
    }
  }
  arrival_ = std::move(still);
  if (shutdown_count_ == size_) {
    // Nothing can become ready any more: every rank has stopped submitting.
    for (const std::string& name : arrival_) {
      Pending& p = pending_[name];
      Response resp = make_response(name, p);
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!p.by_rank[r]) missing.push_back(r);
      resp.error = fmt::format("tensor '{}': the job shut down before {} submitted it", name,
                               rank_list(missing));
      ready_.push_back(std::move(resp));
    }
    pending_.clear();
    arrival_.clear();
  }
}

bool Coordinator::has_ready() const {
  return !ready_.empty() || join_done_ || (size_ > 0 && shutdown_count_ == size_);
}

ResponseList Coordinator::take_ready() {
  ResponseList out;
  std::vector<bool> taken(ready_.size(), false);
  auto fusable = [](const Response& a, const Response& b) {
    const Request& x = a.tensors.front();
    const Request& y = b.tensors.front();
    return a.error.empty() && b.error.empty() && a.type == OpType::kAllreduce &&
           b.type == OpType::kAllreduce && x.dtype == y.dtype && x.op == y.op &&
           x.device == y.device && x.prescale == y.prescale && x.postscale == y.postscale &&
           a.joined == b.joined;
  };
  for (std::size_t i = 0; i < ready_.size(); ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    Response fused = std::move(ready_[i]);
    std::size_t bytes = fused.tensors.front().count() * dtype_size(fused.tensors.front().dtype);
    // Look ahead for compatible tensors, as long as they fit the fusion buffer.
    for (std::size_t j = i + 1; j < ready_.size() && fusion_threshold_ > 0; ++j) {
      if (taken[j] || !fusable(fused, ready_[j])) continue;
      const Request& t = ready_[j].tensors.front();
      const std::size_t b = t.count() * dtype_size(t.dtype);
      if (bytes + b > fusion_threshold_) continue;
      bytes += b;
      fused.tensors.push_back(t);
      taken[j] = true;
    }
    out.responses.push_back(std::move(fused));
  }
  ready_.clear();
  if (join_done_) {
    out.join_done_last = last_joined_;
    join_done_ = false;
  }
  out.shutdown = size_ > 0 && shutdown_count_ == size_;
  return out;
}

std::vector<std::string> Coordinator::stalled(Clock::time_point now,
                                              std::chrono::milliseconds after) {
  std::vector<std::string> lines;
  for (const std::string& name : arrival_) {
    Pending& p = pending_[name];
    if (now - p.last_report < after) continue;
    p.last_report = now;
    std::vector<int> have;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (p.by_rank[r]) {
        have.push_back(r);
      } else if (!joined_[r]) {
        missing.push_back(r);
      }
    }
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - p.first_seen);
    lines.push_back(fmt::format("tensor '{}' ({}) submitted by {} {} s ago; waiting for {}", name,
                                op_type_name(p.by_rank[have.front()]->type), rank_list(have),
                                waited.count(), rank_list(missing)));
  }
  return lines;
}

bool Coordinator::stalled_longer_than(Clock::time_point now,
                                      std::chrono::milliseconds after) const {
  for (const std::string& name : arrival_)
    if (now - pending_.at(name).first_seen >= after) return true;
  return false;
}

}  // namespace hoop::runtime
