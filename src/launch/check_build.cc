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

fs::path build_dir() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).parent_path().parent_path();
}

Probe torch_adapter() {
  const fs::path package = build_dir() / "python" / "hoop";
  bool extension = false;
  std::error_code error;
  for (const auto& file : fs::directory_iterator(package, error))
    extension |= file.path().filename().string().starts_with("_hoop");
  if (!extension)
    return {false, fmt::format("the Python module is not built ({} has no _hoop extension)",
                               package.string())};
  // find_spec, not import: importing torch takes seconds.
  const Result<PythonModules> found = find_python_modules(HOOP_PYTHON_PATH, current_environment());
  if (!found.ok() || !found->torch)
    return {false, fmt::format("module built in {}, but PyTorch is not importable by {}",
                               package.string(), HOOP_PYTHON_PATH)};
  // Whether the module is on this PYTHONPATH already, or where the ranks need it.
  const std::string dir = package.parent_path().string();
  const char* set = std::getenv("PYTHONPATH");
  bool listed = false;
  for (std::string_view rest = set != nullptr ? set : ""; !listed && !rest.empty();) {
    const std::size_t colon = rest.find(':');
    std::error_code same;
    listed = fs::equivalent(fs::path(rest.substr(0, colon)), dir, same);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return {true, fmt::format("module in {}, {}; PyTorch importable by {}", dir,
                            listed ? "on PYTHONPATH" : "not on PYTHONPATH, which the ranks need",
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
    {"nccl", nccl_adapter},
};
const Entry kLaunchers[] = {
    {"hooprun", compiled_in},
    {"ssh", [] { return on_path("ssh"); }},
    {"mpirun", [] { return on_path("mpirun"); }},
    {"srun", [] { return on_path("srun"); }},
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

std::string python_package_dir() {
  const fs::path dir = build_dir() / "python";
  std::error_code error;
  return fs::is_directory(dir / "hoop", error) ? dir.string() : std::string();
}

std::string check_build_report() {
  std::string out = fmt::format("hoop v{}:\n\n", version_text());
  append(out, "transports", transport_entries());
  append(out, "adapters", kAdapters);
  append(out, "launchers", kLaunchers);
  return out;
}

}  // namespace hoop::launch
