#include "collectives/algorithms/timeout_diagnosis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace hoop::collectives {
namespace {

// Listing the ranks costs one store look-up per rank on every rank that timed out.
constexpr int kMaxListedSize = 1024;

}  // namespace

std::string diagnose_timeout(const BootstrapInfo& info, const std::string& prefix,
                             std::uint64_t call, std::chrono::milliseconds grace) {
  const int rank = info.rank;
  const int size = info.size;
  if (size > kMaxListedSize || info.store_host.empty()) return "";
  StoreOptions options;
  options.secret = info.secret;
  options.job_id = info.job_id;
  options.timeout = grace;
  Result<std::unique_ptr<Store>> connected =
      Store::connect(info.store_host, info.store_port, options, rank);
  if (!connected.ok()) return "";
  Store& store = **connected;
  const std::string base = fmt::format("{}/timed_out/{}", prefix, call);
  if (!store.set(fmt::format("{}/{}", base, rank), "").ok()) return "";
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    if (r != rank) keys.push_back(fmt::format("{}/{}", base, r));
  // Some rank not marking itself in time is the expected answer: the wait's own error says
  // nothing more than the look-ups below.
  (void)store.wait(keys, grace);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    Result<std::string> mark = store.get(fmt::format("{}/{}", base, r));
    if (mark.ok()) continue;
    if (mark.status().code() != StatusCode::kNotFound) return "";
    missing.push_back(r);
  }
  if (missing.empty())
    return "; every other rank timed out in this call too (messages lost, or ranks waiting for "
           "each other)";
  return fmt::format(
      "; the job waits for rank{} {}: {} not reach this call's deadline within {:.1f} s of this "
      "rank (stopped, hung, cut off, or in another call)",
      missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
      missing.size() == 1 ? "it did" : "they did", grace.count() / 1000.0);
}

}  // namespace hoop::collectives
