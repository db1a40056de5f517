#include "rendezvous/launchers.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <optional>

#include "core/config.h"
#include "core/crypto.h"
#include "core/log.h"

namespace hoop::rendezvous {
namespace {

// A host list that expands beyond this is a typo, not a cluster.
constexpr std::size_t kMaxNodes = 1 << 20;

std::optional<std::string> env(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return std::nullopt;
  return std::string(raw);
}

Result<std::string> required_env(const char* name, std::string_view launcher) {
  std::optional<std::string> value = env(name);
  if (!value || value->empty())
    return invalid_argument(fmt::format(
        "{} is not set: a job started by {} without hooprun needs it to find rank 0", name,
        launcher));
  return *value;
}

std::optional<long long> parse_number(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

Status bad_list(std::string_view var, std::string_view list, std::string_view why) {
  return invalid_argument(fmt::format("{}='{}' is malformed: {}", var, list, why));
}

// "01-03,07" -> 01 02 03 07 (zero padding kept from the lower bound, as Slurm does).
Result<std::vector<std::string>> expand_ranges(std::string_view ranges, std::string_view var,
                                               std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= ranges.size()) {
    const std::size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string_view range = ranges.substr(start, comma - start);
    const std::size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text =
        dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    const std::optional<long long> lo = parse_number(lo_text), hi = parse_number(hi_text);
    if (!lo || !hi)
      return bad_list(var, list, fmt::format("'{}' is not a number or a range a-b", range));
    if (*lo > *hi) return bad_list(var, list, fmt::format("range '{}' runs backwards", range));
    if (static_cast<std::size_t>(*hi - *lo) >= kMaxNodes - out.size())
      return bad_list(var, list, fmt::format("more than {} hosts", kMaxNodes));
    for (long long i = *lo; i <= *hi; ++i) out.push_back(fmt::format("{:0{}}", i, lo_text.size()));
    start = comma + 1;
  }
  return out;
}

// One host expression without top-level commas: "rack[1-2]-n[01,03]" is the product of its
// bracket groups.
Status expand_item(std::string_view item, std::string_view var, std::string_view list,
                   std::vector<std::string>& hosts) {
  std::vector<std::string> partial{""};
  std::size_t pos = 0;
  while (pos < item.size()) {
    const std::size_t open = item.find('[', pos);
    const std::string_view text = item.substr(pos, open - pos);
    if (text.find(']') != std::string_view::npos) return bad_list(var, list, "unmatched ']'");
    for (std::string& p : partial) p += text;
    if (open == std::string_view::npos) break;
    const std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) return bad_list(var, list, "unmatched '['");
    HOOP_ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                          expand_ranges(item.substr(open + 1, close - open - 1), var, list));
    if (partial.size() * numbers.size() > kMaxNodes)
      return bad_list(var, list, fmt::format("more than {} hosts", kMaxNodes));
    std::vector<std::string> next;
    for (const std::string& p : partial)
      for (const std::string& n : numbers) next.push_back(p + n);
    partial = std::move(next);
    pos = close + 1;
  }
  if (partial.front().empty()) return bad_list(var, list, "an empty host name");
  hosts.insert(hosts.end(), partial.begin(), partial.end());
  return Status::success();
}

// Stable across processes and builds, unlike std::hash: every rank must compute the same.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

std::string fnv1a_hex(std::string_view text) { return fmt::format("{:016x}", fnv1a(text)); }

// What each launcher tells every rank alike.
struct LauncherJob {
  std::string job_id;    // no '/' (it names shared-memory segments)
  std::string identity;  // job id plus whatever per-job values the launcher hands out
  std::string host;      // rank 0's address; empty when it cannot be computed
  std::string no_host;   // why not, naming what to set
};

Result<LauncherJob> mpirun_job(const BootstrapInfo& info) {
  LauncherJob job;
  std::optional<std::string> ns = env("PMIX_NAMESPACE");
  if (!ns) ns = env("OMPI_MCA_ess_base_jobid");
  if (!ns || ns->empty())
    return invalid_argument(
        "neither PMIX_NAMESPACE nor OMPI_MCA_ess_base_jobid is set: cannot tell this mpirun "
        "job from another (set HOOP_JOB_ID)");
  job.job_id = "mpirun-" + fnv1a_hex(*ns);
  // mpirun's own per-job random key and its address make the identity differ between jobs.
  job.identity = job.job_id + "|" + env("OMPI_MCA_orte_precondition_transports").value_or("") +
                 "|" + env("OMPI_MCA_orte_hnp_uri").value_or("");
  if (info.local_size == info.size) {
    job.host = "127.0.0.1";
  } else {
    job.no_host = fmt::format(
        "{} started the {} ranks on several hosts ({} on this one), and rank 0's host cannot "
        "be told from its environment: set HOOP_RENDEZVOUS_ADDR to rank 0's host (mpirun -x "
        "HOOP_RENDEZVOUS_ADDR=host), or use hooprun --mpi -H, which sets it",
        info.launcher, info.size, info.local_size);
  }
  return job;
}

Result<LauncherJob> slurm_job() {
  LauncherJob job;
  HOOP_ASSIGN_OR_RETURN(std::string id, required_env("SLURM_JOB_ID", "srun"));
  if (!parse_number(id)) return bad_list("SLURM_JOB_ID", id, "expected a job number");
  std::string step = env("SLURM_STEP_ID").value_or("0");
  if (!parse_number(step)) return bad_list("SLURM_STEP_ID", step, "expected a step number");
  job.job_id = fmt::format("slurm-{}.{}", id, step);
  // srun places rank 0 on the first node of the step (SLURM_STEP_NODELIST), which is the
  // job's first node when the step has the whole allocation.
  const char* var = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  if (!env(var) && env("SLURM_NODELIST")) var = "SLURM_NODELIST";
  HOOP_ASSIGN_OR_RETURN(std::string list, required_env(var, "srun"));
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> nodes, expand_nodelist(list, var));
  job.host = nodes.front();
  job.identity = job.job_id + "|" + list;
  return job;
}

Result<LauncherJob> kubernetes_job() {
  LauncherJob job;
  HOOP_ASSIGN_OR_RETURN(std::string pattern, config::get_string("HOOP_HOST_PATTERN"));
  if (pattern.empty())
    return invalid_argument(
        "HOOP_HOST_PATTERN is not set: a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) needs "
        "the host-name pattern of its pods to find rank 0, e.g. "
        "HOOP_HOST_PATTERN={job}-{index}.{service}");
  const std::size_t at = pattern.find("{index}");
  if (at == std::string::npos)
    return bad_list("HOOP_HOST_PATTERN", pattern, "it must contain {index}");
  job.host = pattern;
  job.host.replace(at, 7, "0");
  // A pod of an Indexed Job is named <job>-<index>; without HOOP_JOB_ID the job name is that.
  std::string name = env("HOSTNAME").value_or("");
  // Appended rather than `"-" + string`, which GCC 12 at -O3 misreads as an overflow.
  std::string suffix = "-";
  suffix += env("JOB_COMPLETION_INDEX").value_or("");
  if (name.size() > suffix.size() && name.ends_with(suffix))
    name.resize(name.size() - suffix.size());
  else
    name = fnv1a_hex(pattern);
  job.job_id = "k8s-" + name;
  job.identity = job.job_id + "|" + pattern;
  return job;
}

}  // namespace

std::uint16_t default_store_port(std::string_view job_id) {
  return static_cast<std::uint16_t>(kDefaultStorePort + fnv1a(job_id) % kStorePortSpan);
}

Result<std::vector<std::string>> expand_nodelist(std::string_view list, std::string_view var) {
  if (list.empty()) return bad_list(var, list, "it is empty");
  std::vector<std::string> hosts;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0 || depth > 1) return bad_list(var, list, "unbalanced brackets");
    if (i < list.size() && (list[i] != ',' || depth > 0)) continue;
    if (i == start) return bad_list(var, list, "an empty host name");
    HOOP_RETURN_IF_ERROR(expand_item(list.substr(start, i - start), var, list, hosts));
    start = i + 1;
  }
  if (depth != 0) return bad_list(var, list, "unmatched '['");
  return hosts;
}

Result<std::vector<int>> expand_tasks_per_node(std::string_view text, std::string_view var) {
  std::vector<int> counts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    long long repeat = 1;
    if (const std::size_t paren = item.find("(x"); paren != std::string_view::npos) {
      if (!item.ends_with(')')) return bad_list(var, text, "expected N or N(xM)");
      const std::optional<long long> r =
          parse_number(item.substr(paren + 2, item.size() - paren - 3));
      if (!r || *r < 1) return bad_list(var, text, "expected N or N(xM) with M >= 1");
      repeat = *r;
      item = item.substr(0, paren);
    }
    const std::optional<long long> n = parse_number(item);
    if (!n || *n < 1 || *n > INT32_MAX)
      return bad_list(var, text, "expected N or N(xM) with N >= 1");
    if (static_cast<std::size_t>(repeat) > kMaxNodes - counts.size())
      return bad_list(var, text, fmt::format("more than {} nodes", kMaxNodes));
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(*n));
    start = comma + 1;
  }
  return counts;
}

Result<int> slurm_local_size() {
  const std::optional<std::string> tasks = env("SLURM_TASKS_PER_NODE");
  const std::optional<std::string> node = env("SLURM_NODEID");
  if (!tasks || !node) return 0;
  HOOP_ASSIGN_OR_RETURN(std::vector<int> counts,
                        expand_tasks_per_node(*tasks, "SLURM_TASKS_PER_NODE"));
  const std::optional<long long> id = parse_number(*node);
  if (!id) return bad_list("SLURM_NODEID", *node, "expected a node number");
  if (static_cast<std::size_t>(*id) >= counts.size())
    return invalid_argument(
        fmt::format("SLURM_NODEID={} is out of range: SLURM_TASKS_PER_NODE='{}' lists {} node{}",
                    *id, *tasks, counts.size(), counts.size() == 1 ? "" : "s"));
  return counts[static_cast<std::size_t>(*id)];
}

Status resolve_launcher_rendezvous(BootstrapInfo& info) {
  Result<LauncherJob> job = invalid_argument("unknown launcher " + info.launcher);
  if (info.launcher == "mpirun" || info.launcher == "pmix") {
    job = mpirun_job(info);
  } else if (info.launcher == "slurm") {
    job = slurm_job();
  } else if (info.launcher == "kubernetes") {
    job = kubernetes_job();
  }
  if (!job.ok()) {
    // An explicit address and secret need nothing from the launcher.
    if (!config::is_set("HOOP_RENDEZVOUS_ADDR") || !config::is_set("HOOP_SECRET"))
      return job.status();
    HOOP_ASSIGN_OR_RETURN(std::string addr, config::get_string("HOOP_RENDEZVOUS_ADDR"));
    job = LauncherJob{info.launcher + "-" + fnv1a_hex(addr), "", "", ""};
  }
  if (config::is_set("HOOP_JOB_ID")) {
    HOOP_ASSIGN_OR_RETURN(job->job_id, config::get_string("HOOP_JOB_ID"));
  }
  info.job_id = job->job_id;
  if (config::is_set("HOOP_RENDEZVOUS_ADDR")) {
    HOOP_ASSIGN_OR_RETURN(info.store_host, config::get_string("HOOP_RENDEZVOUS_ADDR"));
    if (info.store_host.empty()) return invalid_argument("HOOP_RENDEZVOUS_ADDR is empty");
  } else if (job->host.empty()) {
    return invalid_argument(job->no_host);
  } else {
    info.store_host = job->host;
  }
  if (config::is_set("HOOP_RENDEZVOUS_PORT")) {
    HOOP_ASSIGN_OR_RETURN(std::int64_t port, config::get_int("HOOP_RENDEZVOUS_PORT"));
    info.store_port = static_cast<std::uint16_t>(port);
  } else {
    info.store_port = default_store_port(info.job_id);
  }
  if (config::is_set("HOOP_SECRET")) {
    HOOP_ASSIGN_OR_RETURN(info.secret, config::get_string("HOOP_SECRET"));
    if (info.secret.empty()) return invalid_argument("HOOP_SECRET is empty");
  } else {
    HOOP_ASSIGN_OR_RETURN(crypto::Sha256Digest key,
                          crypto::hmac_sha256("hoop launcher job key v1", job->identity));
    info.secret = crypto::to_hex(crypto::as_view(key));
    if (info.rank == 0)
      HOOP_LOG(kInfo,
               "HOOP_SECRET is not set: the {} job's key is derived from its job identity ({}), "
               "which keeps other jobs out but is no secret from users who can see this job; "
               "set HOOP_SECRET to authenticate ranks",
               info.launcher, info.job_id);
  }
  info.host_store = true;
  return Status::success();
}

}  // namespace hoop::rendezvous
