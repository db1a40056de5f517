// Before a job starts: does the Python interpreter the command names have what the script
// imports? A `python3` on PATH that is not the interpreter hoop was built for (a second
// Python without torch, or without hoop on its PYTHONPATH) would otherwise fail on every rank
// with a bare "No module named ..." far from its cause.
#pragma once

#include <string>
#include <vector>

#include "hoop/core.h"

namespace hoop::launch {

/// What a Python command line runs and imports.
struct PythonCommand {
  bool is_python = false;      // argv[0] is python, python3, python3.11, ...
  std::string name;            // argv[0] as written
  std::string source;          // the script's path, "-c" or "-m MODULE"
  bool imports_hoop = false;   // `import hoop...` / `from hoop...`
  bool imports_torch = false;  // torch, or hoop.torch (which imports it)
};

/// Which of the modules hooprun cares about an interpreter finds (without importing them).
struct PythonModules {
  bool torch = false;
  bool hoop = false;
};

/// Asks `interpreter`, run with environment `env`, whether torch and hoop are importable;
/// io_error when it does not run.
Result<PythonModules> find_python_modules(const std::string& interpreter,
                                          const std::vector<std::string>& env);

/// Reads a command line: the interpreter's name, and what its script (or -c code) imports,
/// read from the script file relative to `workdir`.
PythonCommand inspect_python_command(const std::vector<std::string>& argv,
                                     const std::string& workdir);

/// Checks that `interpreter` (the resolved argv[0]) can import what `command` imports, with
/// the ranks' environment `env`. invalid_argument naming the interpreter, what it lacks, and
/// what has it (the interpreter hoop was built for, or the folder PYTHONPATH needs); ok for
/// commands that are not Python or import neither hoop nor torch.
Status check_python_command(const PythonCommand& command, const std::string& interpreter,
                            const std::vector<std::string>& env);

}  // namespace hoop::launch
