// hoop_comm_t's life: creating one from the environment, splitting and duplicating it, and
// destroying it. Its collectives are in c_collectives.cc, its requests in c_request.cc.
#include "c_comm.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace hoop::c_abi {
namespace {

Result<std::optional<Algorithm>> algorithm_of(const hoop_algorithm_t& algorithm) {
  const long long value = raw_enum(algorithm);
  switch (value) {
    case HOOP_ALGO_FROM_ENV:
      return std::optional<Algorithm>();
    case HOOP_ALGO_AUTO:
      return std::optional(Algorithm::kAuto);
    case HOOP_ALGO_RING:
      return std::optional(Algorithm::kRing);
    case HOOP_ALGO_RECURSIVE_DOUBLING:
      return std::optional(Algorithm::kRecursiveDoubling);
    case HOOP_ALGO_TREE:
      return std::optional(Algorithm::kTree);
    case HOOP_ALGO_RABENSEIFNER:
      return std::optional(Algorithm::kRabenseifner);
    case HOOP_ALGO_HIERARCHICAL:
      return std::optional(Algorithm::kHierarchical);
  }
  return invalid_argument("algorithm: unknown algorithm " + std::to_string(value));
}

Result<CommunicatorOptions> options_of(const hoop_comm_options_t* options) {
  CommunicatorOptions out;
  if (options == nullptr) return out;
  if (options->transport != nullptr) out.transport = options->transport;
  if (options->key_prefix != nullptr) out.key_prefix = options->key_prefix;
  if (options->timeout_ms < 0)
    return invalid_argument("timeout_ms: " + std::to_string(options->timeout_ms) +
                            " is negative (0 takes HOOP_TIMEOUT_SECONDS)");
  if (options->timeout_ms > 0) out.timeout = std::chrono::milliseconds(options->timeout_ms);
  HOOP_ASSIGN_OR_RETURN(out.algorithm, algorithm_of(options->algorithm));
  return out;
}

// Runs `make(Communicator&)` (a split or dup of comm) at the C boundary and hands the new
// communicator out through *out; a null one (HOOP_NO_COLOR) leaves *out NULL.
template <typename F>
hoop_status_t derive(hoop_comm_t* comm, hoop_comm_t** out, F&& make) noexcept {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(out, "out"));
    *out = nullptr;
    HOOP_RETURN_IF_ERROR(check_not_null(comm, "comm"));
    HOOP_ASSIGN_OR_RETURN(auto made, make(*comm->comm));
    if (made != nullptr) *out = new hoop_comm{std::move(made)};
    return Status::success();
  });
}

}  // namespace
}  // namespace hoop::c_abi

using hoop::Communicator;
using hoop::Status;

extern "C" {

hoop_status_t hoop_comm_create(const hoop_comm_options_t* options, hoop_comm_t** comm) {
  return hoop::c_abi::guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_not_null(comm, "comm"));
    *comm = nullptr;
    HOOP_ASSIGN_OR_RETURN(const hoop::CommunicatorOptions opts, hoop::c_abi::options_of(options));
    HOOP_ASSIGN_OR_RETURN(auto created, Communicator::create(opts));
    *comm = new hoop_comm{std::move(created)};
    return Status::success();
  });
}

void hoop_comm_destroy(hoop_comm_t* comm) {
  // Closing connections does not throw; the guard is for the allocator's sake all the same.
  hoop::c_abi::guard([&] {
    delete comm;
    return Status::success();
  });
}

int hoop_comm_rank(const hoop_comm_t* comm) {
  if (comm == nullptr) {
    hoop::c_abi::report(hoop::c_abi::check_not_null(comm, "comm"));
    return -1;
  }
  return comm->comm->rank();
}

int hoop_comm_size(const hoop_comm_t* comm) {
  if (comm == nullptr) {
    hoop::c_abi::report(hoop::c_abi::check_not_null(comm, "comm"));
    return -1;
  }
  return comm->comm->size();
}

hoop_status_t hoop_comm_split(hoop_comm_t* comm, int color, int key, hoop_comm_t** out) {
  return hoop::c_abi::derive(comm, out,
                             [&](Communicator& parent) { return hoop::split(parent, color, key); });
}

hoop_status_t hoop_comm_dup(hoop_comm_t* comm, hoop_comm_t** out) {
  return hoop::c_abi::derive(comm, out, [](Communicator& parent) { return hoop::dup(parent); });
}

}  // extern "C"
