#include "launch/python_check.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "launch/check_build.h"
#include "launch/process.h"

namespace hoop::launch {
namespace {

namespace fs = std::filesystem;

// Scripts are read up to here for their imports; a larger one is not a training script's size.
constexpr std::size_t kMaxScriptBytes = std::size_t{4} << 20;
// How long the interpreter may take to look for the modules (find_spec imports nothing).
constexpr std::chrono::seconds kProbeTimeout{20};

bool is_python_name(const std::string& argv0) {
  const std::string name = fs::path(argv0).filename().string();
  if (!name.starts_with("python")) return false;
  return std::all_of(name.begin() + 6, name.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
}

// Python's interpreter options that take a value in the next argument.
bool takes_value(const std::string& option) {
  return option == "-W" || option == "-X" || option == "--check-hash-based-pycs";
}

// Whether `module` (as written after import/from) is `name` or one of its submodules.
bool names_module(std::string_view module, std::string_view name) {
  return module.starts_with(name) && (module.size() == name.size() || module[name.size()] == '.' ||
                                      module[name.size()] == ',' || module[name.size()] == ' ');
}

// Lines that begin (after indentation) with `import X` or `from X`.
void scan_imports(const std::string& code, PythonCommand& out) {
  std::istringstream lines(code);
  std::string line;
  while (std::getline(lines, line)) {
    std::string_view rest(line);
    rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
    for (std::string_view keyword : {"import ", "from "}) {
      if (!rest.starts_with(keyword)) continue;
      std::string_view module = rest.substr(keyword.size());
      module.remove_prefix(std::min(module.find_first_not_of(" \t"), module.size()));
      if (names_module(module, "hoop")) out.imports_hoop = true;
      if (names_module(module, "torch") || names_module(module, "hoop.torch"))
        out.imports_torch = true;
    }
  }
}

// Runs `argv` with `env`; its stdout, or why it could not be run.
Result<std::string> run_capture(const std::string& path, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env) {
  const Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null.valid()) return errno_error("open /dev/null", errno);
  SpawnRequest request;
  request.path = path;
  request.argv = argv;
  request.env = env;
  request.stdin_fd = null.get();
  HOOP_ASSIGN_OR_RETURN(ChildProcess child, spawn_process(request));
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + kProbeTimeout;
  bool open[2] = {true, true};
  while ((open[0] || open[1]) && std::chrono::steady_clock::now() < deadline) {
    pollfd fds[2] = {{child.stdout_fd.get(), POLLIN, 0}, {child.stderr_fd.get(), POLLIN, 0}};
    if (::poll(fds, 2, 100) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!open[i] || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0 && i == 0) out.append(buf, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) open[i] = false;
    }
  }
  if (open[0] || open[1]) ::kill(-child.pid, SIGKILL);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return io_error(fmt::format("{} did not run ({})", path,
                                open[0] || open[1] ? "it took longer than 20 s" : "it failed"));
  return out;
}

struct Found {
  bool torch = false;
  bool hoop = false;
};

Result<Found> probe(const std::string& interpreter, const std::vector<std::string>& env) {
  HOOP_ASSIGN_OR_RETURN(std::string out,
                        run_capture(interpreter,
                                    {interpreter, "-c",
                                     "import importlib.util as u\n"
                                     "print(int(u.find_spec('torch') is not None), "
                                     "int(u.find_spec('hoop') is not None))"},
                                    env));
  std::istringstream in(out);
  int torch = 0;
  int hoop = 0;
  in >> torch >> hoop;
  return Found{torch == 1, hoop == 1};
}

}  // namespace

PythonCommand inspect_python_command(const std::vector<std::string>& argv,
                                     const std::string& workdir) {
  PythonCommand out;
  if (argv.empty() || !is_python_name(argv[0])) return out;
  out.is_python = true;
  out.name = argv[0];
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-c" && i + 1 < argv.size()) {
      out.source = "-c";
      scan_imports(argv[i + 1], out);
      return out;
    }
    if (a == "-m" && i + 1 < argv.size()) {
      out.source = "-m " + argv[i + 1];
      scan_imports("import " + argv[i + 1], out);
      return out;
    }
    if (takes_value(a)) {
      ++i;
      continue;
    }
    if (a.starts_with("-")) continue;
    out.source = a;
    const fs::path script = fs::path(a).is_absolute() ? fs::path(a) : fs::path(workdir) / a;
    std::ifstream file(script, std::ios::binary);
    if (!file) return out;  // Python reports a missing script itself, on every rank
    std::string code(kMaxScriptBytes, '\0');
    file.read(code.data(), static_cast<std::streamsize>(code.size()));
    code.resize(static_cast<std::size_t>(file.gcount()));
    scan_imports(code, out);
    return out;
  }
  return out;
}

Status check_python_command(const PythonCommand& command, const std::string& interpreter,
                            const std::vector<std::string>& env) {
  if (!command.is_python || (!command.imports_hoop && !command.imports_torch))
    return Status::success();
  Result<Found> found = probe(interpreter, env);
  if (!found.ok()) return Status::success();  // the ranks will report why it does not run
  const bool lacks_torch = command.imports_torch && !found->torch;
  const bool lacks_hoop = command.imports_hoop && !found->hoop;
  if (!lacks_torch && !lacks_hoop) return Status::success();

  std::string what = lacks_torch && lacks_hoop ? "torch and hoop" : lacks_torch ? "torch" : "hoop";
  std::string text = fmt::format("{} ({}) cannot import {}, which {} imports", command.name,
                                 interpreter, what, command.source);
  const std::string built = built_python();
  std::error_code same_error;
  const bool other = !fs::equivalent(interpreter, built, same_error);
  std::optional<Found> built_found;
  if (other) {
    if (Result<Found> f = probe(built, env); f.ok()) built_found = *f;
  }
  if (lacks_torch && built_found && built_found->torch) {
    text += fmt::format(
        "; {}, the interpreter hoop was built for, has torch: name it in the "
        "command instead",
        built);
  } else if (lacks_torch) {
    text += fmt::format("; hoop was built for {}, {}", built,
                        other ? "which lacks torch too" : "which needs python3-torch installed");
  }
  if (lacks_hoop) {
    const std::string dir = python_package_dir();
    text += dir.empty() ? "; install hoop into that interpreter's environment (pip install .)"
                        : fmt::format(
                              "; hoop's package is in {}: pass PYTHONPATH={} (hooprun "
                              "-x PYTHONPATH={} ...)",
                              dir, dir, dir);
  }
  return invalid_argument(text);
}

}  // namespace hoop::launch
