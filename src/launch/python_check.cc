#include "launch/python_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
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

}  // namespace

Result<PythonModules> find_python_modules(const std::string& interpreter,
                                          const std::vector<std::string>& env) {
  HOOP_ASSIGN_OR_RETURN(std::string out,
                        run_for_output(interpreter,
                                       {interpreter, "-c",
                                        "import importlib.util as u\n"
                                        "print(int(u.find_spec('torch') is not None), "
                                        "int(u.find_spec('hoop') is not None))"},
                                       env, kProbeTimeout));
  std::istringstream in(out);
  int torch = 0;
  int hoop = 0;
  in >> torch >> hoop;
  return PythonModules{torch == 1, hoop == 1};
}

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
  Result<PythonModules> found = find_python_modules(interpreter, env);
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
  std::optional<PythonModules> built_found;
  if (other) {
    if (Result<PythonModules> f = find_python_modules(built, env); f.ok()) built_found = *f;
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
