#include "launch/check_build.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "device/device.h"
#include "hoop/version.h"
#include "launch/process.h"
#include "launch/python_check.h"
#include "launch/rank_env.h"
#if HOOP_BUILT_NCCL
#include "collectives/nccl/nccl_backend.h"
#endif
#include "transports/registry.h"

namespace hoop::launch {
namespace {

namespace fs = std::filesystem;

// Whether an entry is usable here, with the detail or the reason.
struct Probe {
  bool ok;
  std::string detail;
};

struct Entry {
  std::string_view name;
  std::function<Probe()> probe;
};

Probe compiled_in() { return {true, "compiled in"}; }

Probe on_path(std::string_view program) {
  const char* path = std::getenv("PATH");
  Result<std::string> found = find_executable(program, path ? path : "");
  if (found.ok()) return {true, *found};
  return {false, fmt::format("{} is not on PATH", program)};
}

/// The folder of this executable.
fs::path exe_dir() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).parent_path();
}

bool has_extension(const fs::path& package) {
  std::error_code error;
  for (const auto& file : fs::directory_iterator(package, error))
    if (file.path().filename().string().starts_with("_hoop")) return true;
  return false;
}

/// The folder holding the `hoop` package that goes with this hooprun, or empty: build/python
/// beside build/bin, lib[/<triplet>]/python3/dist-packages beside an installed prefix's bin
/// (cmake --install, the .deb), or the package itself where pip put hooprun in hoop/bin.
fs::path package_parent() {
  const fs::path bin = exe_dir();
  const fs::path prefix = bin.parent_path();
  std::vector<fs::path> candidates = {prefix / "python", prefix / "lib" / "python3" / "dist-packages"};
  std::error_code error;
  for (const auto& lib : fs::directory_iterator(prefix / "lib", error))
    if (lib.is_directory(error)) candidates.push_back(lib.path() / "python3" / "dist-packages");
  candidates.push_back(prefix.parent_path());  // pip: <site-packages>/hoop/bin/hooprun
  for (const fs::path& c : candidates)
    if (has_extension(c / "hoop")) return c;
  return {};
}

/// Whether `relative` is a file of the package, for the probes of the pure-Python modules and
/// the adapters' libraries.
Probe package_file(std::string_view module, const fs::path& relative, std::string_view needs) {
  const fs::path parent = package_parent();
  std::error_code error;
  if (parent.empty()) return {false, "no hoop Python package beside this hooprun"};
  if (!fs::exists(parent / "hoop" / relative, error))
    return {false, fmt::format("not built: {} has no {}", (parent / "hoop").string(),
                               relative.string())};
  return {true, fmt::format("{} in {}; needs {}", module, parent.string(), needs)};
}

Probe torch_adapter() {
  const fs::path parent = package_parent();
  if (parent.empty())
    return {false, fmt::format("the Python module is not built (no hoop package with its _hoop "
                               "extension beside {})",
                               exe_dir().string())};
  // find_spec, not import: importing torch takes seconds.
  const Result<PythonModules> found = find_python_modules(HOOP_PYTHON_PATH, current_environment());
  if (!found.ok() || !found->torch)
    return {false, fmt::format("module built in {}, but PyTorch is not importable by {}",
                               parent.string(), HOOP_PYTHON_PATH)};
  // Whether the module is on this PYTHONPATH already, or where the ranks need it.
  const std::string dir = parent.string();
  const char* set = std::getenv("PYTHONPATH");
  bool listed = false;
  for (std::string_view rest = set != nullptr ? set : ""; !listed && !rest.empty();) {
    const std::size_t colon = rest.find(':');
    std::error_code same;
    listed = fs::equivalent(fs::path(rest.substr(0, colon)), dir, same);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  // An installed package (the .deb's dist-packages, pip's site-packages) needs no PYTHONPATH.
  const char* where = listed       ? "on PYTHONPATH"
                      : found->hoop ? "importable without PYTHONPATH"
                                    : "not on PYTHONPATH, which the ranks need";
  return {true, fmt::format("module in {}, {}; PyTorch importable by {}", dir, where,
                            HOOP_PYTHON_PATH)};
}

// The NCCL adapter is linked into libhoop where configure found NCCL; it runs only on a device.
Probe nccl_adapter() {
#if HOOP_BUILT_NCCL
  const std::string built =
      fmt::format("compiled in, NCCL {}, HOOP_GPU_BACKEND=nccl", nccl::library_version());
  if (device::device_count() == 0)
    return {false,
            fmt::format("{}, but no usable CUDA device: {}", built, device::unavailable_reason())};
  if (device::fake()) return {false, built + ", but the device is HOOP_FAKE_DEVICE's"};
  return {true, built};
#else
  return {false, HOOP_BUILT_CUDA
                     ? "not compiled in: NCCL (libnccl) was not found at configure time"
                     : "not compiled in: no CUDA toolkit at configure time, or -DHOOP_CUDA=OFF"};
#endif
}

// The transports come from the registry (transports/registry.h); an adapter takes one line here.
std::vector<Entry> transport_entries() {
  std::vector<Entry> out;
  for (const transports::TransportEntry* t : transports::registered_transports()) {
    out.push_back({t->name, [t] {
                     const transports::Probe p = transports::probe(*t);
                     return Probe{p.usable, p.detail};
                   }});
  }
  return out;
}

const Entry kAdapters[] = {
    {"train", compiled_in},
    {"torch", torch_adapter},
    {"jax",
     [] { return package_file("hoop.jax", "jax/libhoop_jax.so", "jax (.frameworks/venv)"); }},
    {"tensorflow",
     [] {
       return package_file("hoop.tensorflow", "tensorflow/libhoop_tensorflow.so",
                           "tensorflow (.frameworks/venv)");
     }},
    {"keras",
     [] {
       return package_file("hoop.keras", "tensorflow/libhoop_tensorflow.so",
                           "keras 3 and tensorflow (.frameworks/venv)");
     }},
    {"nccl", nccl_adapter},
};
const Entry kLaunchers[] = {
    {"hooprun", compiled_in},
    {"ssh", [] { return on_path("ssh"); }},
    {"mpirun", [] { return on_path("mpirun"); }},
    {"srun", [] { return on_path("srun"); }},
    {"ray", [] { return package_file("hoop.ray", "ray/__init__.py", "ray (.engines/venv)"); }},
    {"spark",
     [] { return package_file("hoop.spark", "spark/__init__.py", "pyspark (.engines/venv)"); }},
};

void append(std::string& out, std::string_view title, std::span<const Entry> entries) {
  out += fmt::format("Available {}:\n", title);
  for (const Entry& e : entries) {
    const Probe p = e.probe();
    out += fmt::format("    [{}] {}  ({})\n", p.ok ? 'X' : ' ', e.name, p.detail);
  }
}

}  // namespace

std::string version_text() { return std::string(hoop::version()); }

std::string built_python() { return HOOP_PYTHON_PATH; }

std::string python_package_dir() { return package_parent().string(); }

std::string check_build_report() {
  std::string out = fmt::format("hoop v{}:\n\n", version_text());
  append(out, "transports", transport_entries());
  append(out, "adapters", kAdapters);
  append(out, "launchers", kLaunchers);
  return out;
}

}  // namespace hoop::launch
