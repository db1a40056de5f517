#include "launch/remote.h"

#include <fmt/format.h>

#include <algorithm>

#include "launch/hosts.h"
#include "launch/output.h"
#include "launch/rank_env.h"

namespace hoop::launch {

HostAccess host_access(const std::string& host, const std::optional<std::string>& spawner,
                       const SshOptions& ssh) {
  HostAccess access;
  access.host = host;
  access.ssh = ssh;
  if (spawner) {
    access.kind = HostAccess::Kind::kSpawner;
    access.spawner = expand_spawner(*spawner, host);
  } else if (!is_local_host(host)) {
    access.kind = HostAccess::Kind::kSsh;
  }
  return access;
}

std::string describe_access(const HostAccess& access) {
  switch (access.kind) {
    case HostAccess::Kind::kLocal:
      return "on this machine";
    case HostAccess::Kind::kSpawner:
      return fmt::format("through --spawner ({})", format_command(access.spawner));
    case HostAccess::Kind::kSsh:
      break;
  }
  return access.ssh.port ? fmt::format("over ssh (port {})", *access.ssh.port) : "over ssh";
}

std::string remote_shell_command(std::string_view workdir, std::span<const std::string> env,
                                 std::span<const std::string> argv) {
  std::vector<std::string> words{"exec", "env"};
  words.insert(words.end(), env.begin(), env.end());
  words.insert(words.end(), argv.begin(), argv.end());
  return fmt::format("cd {} && {}", format_command({std::string(workdir)}), format_command(words));
}

std::vector<std::string> command_on_host(const HostAccess& access, std::span<const std::string> env,
                                         std::span<const std::string> argv,
                                         std::string_view workdir) {
  std::vector<std::string> out;
  switch (access.kind) {
    case HostAccess::Kind::kLocal:
      break;
    case HostAccess::Kind::kSpawner:
      out = access.spawner;
      break;
    case HostAccess::Kind::kSsh:
      // Like horovodrun: never a password prompt or a host-key question, which nobody could
      // answer; LogLevel=ERROR keeps ssh's "Permanently added" notice out of every rank's
      // stderr.
      out = {"ssh"};
      for (const char* option : {"BatchMode=yes", "StrictHostKeyChecking=no",
                                 "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"}) {
        out.push_back("-o");
        out.push_back(option);
      }
      if (access.ssh.connect_timeout_s > 0) {
        out.push_back("-o");
        out.push_back(fmt::format("ConnectTimeout={}", access.ssh.connect_timeout_s));
      }
      if (access.ssh.port) {
        out.push_back("-p");
        out.push_back(std::to_string(*access.ssh.port));
      }
      if (access.ssh.identity_file) {
        out.push_back("-i");
        out.push_back(*access.ssh.identity_file);
      }
      out.push_back("--");
      out.push_back(access.host);
      out.push_back(remote_shell_command(workdir, env, argv));
      return out;
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> ssh_environment(std::span<const std::string> env,
                                         std::span<const std::string> extra_names) {
  constexpr std::string_view kNames[] = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH"};
  std::vector<std::string> out;
  for (const std::string& entry : env) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (name == kSecretVar || name.empty()) continue;
    if (name.starts_with("HOOP_") || name.starts_with("HOROVOD_") ||
        std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames) ||
        std::find(extra_names.begin(), extra_names.end(), name) != extra_names.end()) {
      out.push_back(entry);
    }
  }
  return out;
}

}  // namespace hoop::launch
