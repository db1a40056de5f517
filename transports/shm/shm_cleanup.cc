// Removal of a job's segments that a crash during set-up left named in /dev/shm.
#include <dirent.h>
#include <sys/mman.h>

#include <string>
#include <string_view>
#include <vector>

#include "transports/shm/shm_transport.h"

namespace hoop::shm {

std::string segment_prefix(const std::string& job_id) { return "hoop-" + job_id + "-"; }

int remove_job_segments(const std::string& job_id) {
  const std::string prefix = segment_prefix(job_id);
  std::vector<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      if (std::string_view(e->d_name).starts_with(prefix)) names.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  int removed = 0;
  for (const std::string& name : names) {
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace hoop::shm
