#include "core/host_id.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>

#include "core/config.h"

namespace hoop {

Result<std::string> local_host_id() {
  // HOOP_HOST_ID has no default, so get_string answers not_found when it is unset.
  if (config::is_set("HOOP_HOST_ID")) {
    HOOP_ASSIGN_OR_RETURN(std::string id, config::get_string("HOOP_HOST_ID"));
    if (!id.empty()) return id;
  }
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!(in >> boot_id) || boot_id.empty())
    return internal_error("host id: cannot read /proc/sys/kernel/random/boot_id (set HOOP_HOST_ID)");
  // The network namespace separates simulated hosts (and containers) on one machine.
  struct stat st {};
  if (::stat("/proc/self/ns/net", &st) != 0)
    return internal_error("host id: cannot stat /proc/self/ns/net (set HOOP_HOST_ID)");
  return fmt::format("{}/{}", boot_id, static_cast<unsigned long long>(st.st_ino));
}

}  // namespace hoop
