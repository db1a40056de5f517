#include "launch/rank_env.h"

#include <fmt/format.h>

#include <set>
#include <string_view>

#include "core/config.h"

extern char** environ;

namespace hoop::launch {
namespace {

std::string_view entry_name(std::string_view entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

std::vector<std::pair<std::string, std::string>> launcher_variables(const JobEnv& job, int rank) {
  // Without places every rank shares one host: the local layout is the global one.
  const RankPlace place = job.places.empty() ? RankPlace{0, rank, job.size}
                                             : job.places.at(static_cast<std::size_t>(rank));
  const int num_hosts = job.places.empty() ? 1 : job.num_hosts;
  std::vector<std::pair<std::string, std::string>> vars{
      {"HOOP_RANK", std::to_string(rank)},
      {"HOOP_SIZE", std::to_string(job.size)},
      {"HOOP_LOCAL_RANK", std::to_string(place.local_rank)},
      {"HOOP_LOCAL_SIZE", std::to_string(place.local_size)},
      {"HOOP_CROSS_RANK", std::to_string(place.cross_rank)},
      {"HOOP_CROSS_SIZE", std::to_string(num_hosts)},
      {"HOOP_RENDEZVOUS_ADDR", job.rendezvous_addr},
      {"HOOP_RENDEZVOUS_PORT", std::to_string(job.rendezvous_port)},
      {std::string(kSecretVar), job.secret},
      {"HOOP_JOB_ID", job.job_id},
      {"HOOP_START_TIMEOUT", fmt::format("{}", job.start_timeout_s)},
  };
  if (!job.iface.empty()) vars.emplace_back("HOOP_IFACE", job.iface);
  return vars;
}

namespace {

constexpr std::size_t kLayoutVars = 6;  // launcher_variables' first entries: the rank layout

// `inherited` without the variables in `vars`, those named in `also_removed` and their
// Horovod aliases, followed by `vars`.
std::vector<std::string> with_variables(
    std::span<const std::string> inherited,
    const std::vector<std::pair<std::string, std::string>>& vars,
    std::span<const std::pair<std::string, std::string>> also_removed) {
  std::set<std::string, std::less<>> replaced;
  auto replace = [&](const std::string& name) {
    replaced.insert(name);
    if (const config::Var* var = config::find_var(name); var && !var->horovod_alias.empty()) {
      replaced.insert(std::string(var->horovod_alias));
    }
  };
  for (const auto& [name, value] : vars) replace(name);
  for (const auto& [name, value] : also_removed) replace(name);
  std::vector<std::string> env;
  env.reserve(inherited.size() + vars.size());
  for (const std::string& entry : inherited) {
    if (!replaced.contains(entry_name(entry))) env.push_back(entry);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

std::vector<std::string> rank_environment(std::span<const std::string> inherited, const JobEnv& job,
                                          int rank) {
  auto vars = launcher_variables(job, rank);
  // horovodrun sets the rank layout (the first six) under Horovod's names too, and scripts
  // read them.
  for (std::size_t i = 0; i < kLayoutVars; ++i) {
    vars.emplace_back("HOROVOD_" + vars[i].first.substr(std::string_view("HOOP_").size()),
                      vars[i].second);
  }
  return with_variables(inherited, vars, {});
}

std::vector<std::string> elastic_environment(std::span<const std::string> inherited,
                                             const JobEnv& job, const std::string& worker_id,
                                             double elastic_timeout_s) {
  const auto all = launcher_variables(job, 0);
  const std::span layout(all.data(), kLayoutVars);
  std::vector<std::pair<std::string, std::string>> vars(all.begin() + kLayoutVars, all.end());
  vars.emplace_back("HOOP_ELASTIC_ID", worker_id);
  vars.emplace_back("HOOP_ELASTIC_TIMEOUT", fmt::format("{}", elastic_timeout_s));
  return with_variables(inherited, vars, layout);
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  return env;
}

}  // namespace hoop::launch
