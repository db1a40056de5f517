#include "transports/registry.h"

#include <algorithm>
#include <mutex>

namespace hoop::transports {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<TransportEntry> entries;
};

// A function-local static: registrations run from other files' static initializers.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_transport(const TransportEntry& entry) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.entries.push_back(entry);
  std::stable_sort(r.entries.begin(), r.entries.end(),
                   [](const TransportEntry& a, const TransportEntry& b) {
                     return a.auto_order != b.auto_order ? a.auto_order < b.auto_order
                                                          : a.name < b.name;
                   });
}

std::vector<const TransportEntry*> registered_transports() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<const TransportEntry*> out;
  for (const TransportEntry& e : r.entries) out.push_back(&e);
  return out;
}

const TransportEntry* find_transport(std::string_view name) {
  for (const TransportEntry* e : registered_transports())
    if (e->name == name) return e;
  return nullptr;
}

bool transport_built(std::string_view name) {
  const TransportEntry* e = find_transport(name);
  return e != nullptr && e->built;
}

Probe probe(const TransportEntry& entry) {
  if (!entry.built || entry.probe == nullptr) return {false, std::string(entry.not_built)};
  return entry.probe();
}

std::string transport_names(bool host_memory_only) {
  std::string out;
  for (const TransportEntry* e : registered_transports()) {
    if (host_memory_only && e->device_memory) continue;
    if (!out.empty()) out += ", ";
    out += e->name;
  }
  return out;
}

}  // namespace hoop::transports
