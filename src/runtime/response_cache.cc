#include "runtime/response_cache.h"

namespace hoop::runtime {
namespace {

bool cacheable(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kBroadcast || t == OpType::kReducescatter;
}

}  // namespace

std::optional<std::uint32_t> ResponseCache::find(const Request& r) const {
  auto it = by_name_.find(r.name);
  if (it == by_name_.end() || !same_description(*slots_[it->second], r)) return std::nullopt;
  return it->second;
}

std::optional<std::uint32_t> ResponseCache::slot_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void ResponseCache::put(const std::shared_ptr<const Request>& shared) {
  const Request& r = *shared;
  if (!cacheable(r.type)) return;
  if (auto it = by_name_.find(r.name); it != by_name_.end()) {
    // A tensor that ran as it was cached (every step of a training loop) changes nothing.
    std::shared_ptr<const Request>& cached = slots_[it->second];
    if (!same_description(*cached, r)) cached = shared;
    return;
  }
  if (slots_.size() >= capacity_) return;
  by_name_.emplace(r.name, static_cast<std::uint32_t>(slots_.size()));
  slots_.push_back(shared);
}

}  // namespace hoop::runtime
