#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "core/config.h"
#include "core/log.h"
#include "hoop/rendezvous.h"
#include "rendezvous/launchers.h"

namespace hoop {
namespace {

// Reads an integer variable set by another launcher (mpirun, Slurm); those are not in hoop's
// registry, so they are checked here with the same strictness.
Result<std::optional<int>> foreign_int(const char* name, int min) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return std::optional<int>();
  std::string_view text(raw);
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min)
    return invalid_argument(
        fmt::format("{}='{}' is malformed: expected an integer >= {}", name, text, min));
  return std::optional<int>(value);
}

// One layout field: hoop's own variable first, then the other launchers' in order.
struct Field {
  const char* hoop_name;
  std::initializer_list<const char*> foreign;
  int min;
};

Result<std::optional<int>> read_field(const Field& f, std::string* source) {
  if (config::is_set(f.hoop_name)) {
    HOOP_ASSIGN_OR_RETURN(std::int64_t v, config::get_int(f.hoop_name));
    *source = f.hoop_name;
    return std::optional<int>(static_cast<int>(v));
  }
  for (const char* name : f.foreign) {
    HOOP_ASSIGN_OR_RETURN(std::optional<int> v, foreign_int(name, f.min));
    if (v) {
      *source = name;
      return v;
    }
  }
  return std::optional<int>();
}

std::string launcher_of(std::string_view rank_source) {
  if (rank_source.starts_with("HOOP_") || rank_source.starts_with("HOROVOD_")) return "env";
  if (rank_source.starts_with("OMPI_")) return "mpirun";
  if (rank_source.starts_with("PMIX_")) return "pmix";
  if (rank_source.starts_with("SLURM_")) return "slurm";
  if (rank_source == "JOB_COMPLETION_INDEX") return "kubernetes";
  return "none";
}

Status check_below(int value, const std::string& value_src, int bound,
                   const std::string& bound_src) {
  if (value < bound) return Status::success();
  return invalid_argument(
      fmt::format("{}={} must be less than {}={}", value_src, value, bound_src, bound));
}

}  // namespace

namespace rendezvous {

std::string joined_key(const BootstrapInfo& info, int rank) {
  return fmt::format("{}/joined/{}", info.key_prefix, rank);
}

std::vector<std::string> joined_keys(const BootstrapInfo& info) {
  std::vector<std::string> keys;
  for (int r = 0; r < info.size; ++r) keys.push_back(joined_key(info, r));
  return keys;
}

Result<std::unique_ptr<Store>> open_store(const BootstrapInfo& info) {
  if (info.store_host.empty())
    return invalid_argument("no rendezvous store in this job (HOOP_RENDEZVOUS_ADDR is not set)");
  StoreOptions options;
  options.secret = info.secret;
  options.job_id = info.job_id;
  // Connecting may have to wait for a slow launcher as long as the whole start-up may take.
  options.timeout = std::max(info.timeout, info.start_timeout);
  if (info.host_store) return rendezvous::connect_hosted_store(info, options);
  return Store::connect(info.store_host, info.store_port, options, info.rank);
}

Status missing_ranks_error(Store& store, const BootstrapInfo& info, std::string_view within) {
  std::string missing;
  int n_missing = 0;
  for (int r = 0; r < info.size; ++r) {
    auto v = store.get(joined_key(info, r));
    if (v.ok()) continue;
    if (v.status().code() != StatusCode::kNotFound) return v.status();
    if (n_missing++ > 0) missing += ", ";
    missing += std::to_string(r);
  }
  return timeout_error(fmt::format("{} of {} ranks did not join the job within {}: rank{} {}",
                                   n_missing, info.size, within, n_missing == 1 ? "" : "s",
                                   missing));
}

}  // namespace rendezvous

Result<BootstrapInfo> bootstrap_from_env() {
  HOOP_RETURN_IF_ERROR(config::validate_env());
  BootstrapInfo info;
  std::string rank_src = "default", size_src = "default", lrank_src = "default",
              lsize_src = "default", crank_src = "default", csize_src = "default";
  HOOP_ASSIGN_OR_RETURN(
      auto rank,
      read_field({"HOOP_RANK",
                  {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX"},
                  0},
                 &rank_src));
  HOOP_ASSIGN_OR_RETURN(
      auto size, read_field({"HOOP_SIZE", {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, 1}, &size_src));
  HOOP_ASSIGN_OR_RETURN(
      auto local_rank,
      read_field({"HOOP_LOCAL_RANK", {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0},
                 &lrank_src));
  HOOP_ASSIGN_OR_RETURN(
      auto local_size,
      read_field({"HOOP_LOCAL_SIZE", {"OMPI_COMM_WORLD_LOCAL_SIZE"}, 1}, &lsize_src));
  HOOP_ASSIGN_OR_RETURN(auto cross_rank,
                        read_field({"HOOP_CROSS_RANK", {"SLURM_NODEID"}, 0}, &crank_src));
  HOOP_ASSIGN_OR_RETURN(auto cross_size,
                        read_field({"HOOP_CROSS_SIZE", {"SLURM_NNODES"}, 1}, &csize_src));

  if (rank.has_value() != size.has_value()) {
    return invalid_argument(
        rank ? fmt::format("{} is set but no job size is (set HOOP_SIZE)", rank_src)
             : fmt::format("{} is set but no rank is (set HOOP_RANK)", size_src));
  }
  info.launcher = launcher_of(rank_src);
  // hooprun sets the job id with the layout; hand-set HOOP_* variables rarely do.
  if (info.launcher == "env" && config::is_set("HOOP_JOB_ID")) info.launcher = "hooprun";
  // Slurm and Kubernetes give no local size as a plain integer.
  if (!local_size && info.launcher == "slurm") {
    HOOP_ASSIGN_OR_RETURN(int n, rendezvous::slurm_local_size());
    if (n > 0) local_size = n, lsize_src = "SLURM_TASKS_PER_NODE";
  }
  if (info.launcher == "kubernetes") {  // one pod per rank
    if (!local_size) local_size = 1, lsize_src = "HOOP_LOCAL_SIZE (default 1 on Kubernetes)";
    if (!local_rank) local_rank = 0, lrank_src = "HOOP_LOCAL_RANK (default 0 on Kubernetes)";
  }
  info.rank = rank.value_or(0);
  info.size = size.value_or(1);
  HOOP_RETURN_IF_ERROR(check_below(info.rank, rank_src, info.size, size_src));
  // From here on every log line of this process says which rank wrote it.
  log::set_rank(info.rank);
  HOOP_RETURN_IF_ERROR(log::init_from_env());

  // Without a local layout every rank is taken to be on one host, the common local case.
  info.local_size = local_size.value_or(info.size);
  info.local_rank = local_rank.value_or(info.rank);
  if (!local_size) lsize_src = size_src;
  if (!local_rank) lrank_src = rank_src;
  HOOP_RETURN_IF_ERROR(check_below(info.local_rank, lrank_src, info.local_size, lsize_src));
  if (info.local_size > info.size)
    return invalid_argument(
        fmt::format("{}={} exceeds {}={}", lsize_src, info.local_size, size_src, info.size));
  info.cross_size = cross_size.value_or((info.size + info.local_size - 1) / info.local_size);
  info.cross_rank = cross_rank.value_or(info.rank / info.local_size);
  HOOP_RETURN_IF_ERROR(check_below(info.cross_rank, crank_src, info.cross_size, csize_src));

  const bool has_addr = config::is_set("HOOP_RENDEZVOUS_ADDR");
  const bool has_port = config::is_set("HOOP_RENDEZVOUS_PORT");
  // Under mpirun, srun or Kubernetes rank 0 hosts the store, on a port of its own choice.
  const bool foreign =
      info.launcher != "env" && info.launcher != "hooprun" && info.launcher != "none";
  if (has_addr != has_port && !foreign)
    return invalid_argument(has_addr
                                ? "HOOP_RENDEZVOUS_ADDR is set but HOOP_RENDEZVOUS_PORT is not"
                                : "HOOP_RENDEZVOUS_PORT is set but HOOP_RENDEZVOUS_ADDR is not");
  if (foreign && info.size > 1) {
    HOOP_RETURN_IF_ERROR(rendezvous::resolve_launcher_rendezvous(info));
  } else if (has_addr && has_port) {
    HOOP_ASSIGN_OR_RETURN(info.store_host, config::get_string("HOOP_RENDEZVOUS_ADDR"));
    HOOP_ASSIGN_OR_RETURN(std::int64_t port, config::get_int("HOOP_RENDEZVOUS_PORT"));
    info.store_port = static_cast<std::uint16_t>(port);
    if (info.store_host.empty()) return invalid_argument("HOOP_RENDEZVOUS_ADDR is empty");
    if (!config::is_set("HOOP_SECRET"))
      return invalid_argument(
          "HOOP_SECRET is not set: the rendezvous store only admits ranks that know the job "
          "secret (hooprun sets it)");
    HOOP_ASSIGN_OR_RETURN(info.secret, config::get_string("HOOP_SECRET"));
    if (info.secret.empty()) return invalid_argument("HOOP_SECRET is empty");
  } else if (info.size > 1) {
    return invalid_argument(fmt::format(
        "a job of {} ranks ({}) needs a rendezvous store, but HOOP_RENDEZVOUS_ADDR is not set; "
        "launch with hooprun or set HOOP_RENDEZVOUS_ADDR/PORT and HOOP_SECRET",
        info.size, size_src));
  }
  if (config::is_set("HOOP_JOB_ID") && !info.host_store) {
    HOOP_ASSIGN_OR_RETURN(info.job_id, config::get_string("HOOP_JOB_ID"));
  }
  HOOP_ASSIGN_OR_RETURN(info.start_timeout, config::get_milliseconds("HOOP_START_TIMEOUT"));
  HOOP_ASSIGN_OR_RETURN(info.timeout, config::get_milliseconds("HOOP_TIMEOUT_SECONDS"));
  if (config::is_set("HOOP_ELASTIC_ID")) {
    HOOP_ASSIGN_OR_RETURN(info.elastic_id, config::get_string("HOOP_ELASTIC_ID"));
  }
  HOOP_ASSIGN_OR_RETURN(info.elastic_timeout, config::get_milliseconds("HOOP_ELASTIC_TIMEOUT"));
  if (!info.elastic_id.empty() && info.store_host.empty())
    return invalid_argument(
        "HOOP_ELASTIC_ID is set but HOOP_RENDEZVOUS_ADDR is not: an elastic worker is started by "
        "hooprun --host-discovery-script, which hosts the store");
  return info;
}

Result<std::unique_ptr<Store>> connect_store(const BootstrapInfo& info) {
  HOOP_ASSIGN_OR_RETURN(auto store, rendezvous::open_store(info));
  HOOP_RETURN_IF_ERROR(store->set(rendezvous::joined_key(info, info.rank), "1"));
  Status joined = store->wait(rendezvous::joined_keys(info), info.start_timeout);
  if (joined.code() != StatusCode::kTimeout) {
    HOOP_RETURN_IF_ERROR(joined);
    HOOP_LOG(kDebug, "all {} ranks joined the store at {}:{}", info.size, info.store_host,
             info.store_port);
    return store;
  }
  return rendezvous::missing_ranks_error(
      *store, info, fmt::format("{:.3g} s (HOOP_START_TIMEOUT)", info.start_timeout.count() / 1e3));
}

}  // namespace hoop
