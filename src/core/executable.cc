#include "core/executable.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hoop {
namespace {

// Checks one candidate path; 0 when it is an executable regular file, else the errno that
// execve would report for it.
int check_executable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  if (::access(path.c_str(), X_OK) != 0) return errno;
  return 0;
}

}  // namespace

Status cannot_execute(std::string_view program, int errnum) {
  std::string message = fmt::format("cannot execute '{}': {}", program, std::strerror(errnum));
  if (errnum == ENOENT) return not_found(std::move(message));
  return invalid_argument(std::move(message));
}

Result<std::string> find_executable(std::string_view program, std::string_view path_env) {
  if (program.empty()) return not_found("cannot execute '': No such file or directory");
  if (program.find('/') != std::string_view::npos) {
    std::string path(program);
    if (int error = check_executable(path); error != 0) return cannot_execute(program, error);
    return path;
  }
  // Like execvp: a candidate that exists but cannot be executed is reported only when no
  // later directory has a usable one.
  int first_error = ENOENT;
  std::size_t start = 0;
  while (start <= path_env.size()) {
    std::size_t end = path_env.find(':', start);
    if (end == std::string_view::npos) end = path_env.size();
    std::string_view dir = path_env.substr(start, end - start);
    std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, program);
    int error = check_executable(candidate);
    if (error == 0) return candidate;
    if (first_error == ENOENT && error != ENOENT && error != ENOTDIR) first_error = error;
    start = end + 1;
  }
  return cannot_execute(program, first_error);
}

}  // namespace hoop
