// Which host a process runs on, as hoop counts hosts: ranks with equal ids share memory (the
// shm transport, the hierarchy's groups). The id is the kernel's boot id plus the inode of the
// network namespace, so that ranks in two network namespaces of one machine (the netns test
// bed, containers) count as two hosts; HOOP_HOST_ID overrides it.
#pragma once

#include <string>

#include "hoop/core.h"

namespace hoop {

/// This process's host id: HOOP_HOST_ID when set, else "<boot id>/<netns inode>".
Result<std::string> local_host_id();

}  // namespace hoop
