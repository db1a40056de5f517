// Finding a program the way execvp does, for the launchers and for the probes that ask whether
// a program (mpirun, ssh) is there.
#pragma once

#include <string>
#include <string_view>

#include "hoop/core.h"

namespace hoop {

/// Resolves `program` the way execvp would: a name with a slash is used as is, anything else
/// is searched in `path_env` (colon-separated; empty entries mean the current directory).
/// not_found when nothing matches; invalid_argument when the match is not executable.
Result<std::string> find_executable(std::string_view program, std::string_view path_env);

/// "cannot execute '<program>': <strerror>": not_found for ENOENT, else invalid_argument.
Status cannot_execute(std::string_view program, int errnum);

}  // namespace hoop
