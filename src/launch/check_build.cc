#include "launch/check_build.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>

#include "device/device.h"
#include "launch/process.h"
#if HOOP_BUILT_NCCL
#include "adapters/nccl/nccl_backend.h"
#endif
#if HOOP_BUILT_MPI
#include "transports/mpi/mpi_transport.h"
#endif
#ifdef HOOP_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif

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

Probe shm_usable() {
  // The transport creates its segments with shm_open, i.e. files in /dev/shm.
  const std::string probe = fmt::format("/dev/shm/hoop-check-build-{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return {false,
            fmt::format("compiled in, but /dev/shm is not writable: {}", std::strerror(errno))};
  ::close(fd);
  ::unlink(probe.c_str());
  return {true, "compiled in, /dev/shm is writable"};
}

// UCX is usable where a UCP worker opens under this environment's UCX_* variables.
Probe ucx_probe() {
#ifdef HOOP_HAVE_UCX
  const char* tls = std::getenv("UCX_TLS");
  const std::string built =
      fmt::format("compiled in, UCX {}, UCX_TLS={}", ucx::ucx_version(), tls ? tls : "(all)");
  std::string why;
  if (ucx::ucx_usable(&why)) return {true, built};
  return {false, fmt::format("{}, but {}", built, why)};
#else
  return {false, "not compiled in: libucx-dev was not found at configure time"};
#endif
}

// MPI carries a job that mpirun launched: usable when this process is one, or mpirun is there.
Probe mpi_probe() {
#if HOOP_BUILT_MPI
  const std::string built = fmt::format("compiled in, {}", mpi::mpi_library_version());
  std::string why;
  if (mpi::mpi_usable(&why)) return {true, built};
  const Probe mpirun = on_path("mpirun");
  if (!mpirun.ok) return {false, fmt::format("{}, but {}", built, mpirun.detail)};
  return {true, fmt::format("{}; for jobs mpirun launches with HOOP_TRANSPORT=mpi", built)};
#else
  return {false, "not compiled in: Open MPI (libopenmpi-dev) was not found at configure time"};
#endif
}

// CUDA is usable where the runtime finds a device; hoop's GPU paths all go through hoop::device.
Probe cuda_probe() {
  if (!device::cuda_built()) {
    return {false, "not compiled in: no CUDA toolkit (nvcc) at configure time, or -DHOOP_CUDA=OFF"};
  }
  if (device::device_count() == 0) {
    return {false, fmt::format("built, but no usable device: {}", device::unavailable_reason())};
  }
  return {true, device::describe()};
}

fs::path build_dir() {
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error).parent_path().parent_path();
}

// Runs `argv` with its output discarded; true when it exits 0.
bool succeeds(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
  if (!succeeds({HOOP_PYTHON_PATH, "-c",
                 "import importlib.util,sys; sys.exit(importlib.util.find_spec('torch') is None)"}))
    return {false, fmt::format("module built in {}, but PyTorch is not importable by {}",
                               package.string(), HOOP_PYTHON_PATH)};
  return {true, fmt::format("PYTHONPATH={}, PyTorch importable by {}",
                            package.parent_path().string(), HOOP_PYTHON_PATH)};
}

// The NCCL adapter is linked into libhoop where configure found NCCL; it runs only on a device.
Probe nccl_adapter() {
#if HOOP_BUILT_NCCL
  const std::string built =
      fmt::format("compiled in, NCCL {}, HOOP_GPU_BACKEND=nccl", nccl::library_version());
  if (device::device_count() == 0)
    return {false,
            fmt::format("{}, but no usable CUDA device: {}", built, device::unavailable_reason())};
  return {true, built};
#else
  return {false, HOOP_BUILT_CUDA
                     ? "not compiled in: NCCL (libnccl) was not found at configure time"
                     : "not compiled in: no CUDA toolkit at configure time, or -DHOOP_CUDA=OFF"};
#endif
}

// One line per entry; the lead adds a transport or an adapter with one line here.
const Entry kTransports[] = {
    {"tcp", compiled_in}, {"shm", shm_usable},  {"ucx", ucx_probe},
    {"mpi", mpi_probe},   {"cuda", cuda_probe},
};
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

std::string check_build_report() {
  std::string out = fmt::format("hoop v{}:\n\n", HOOP_VERSION_TEXT);
  append(out, "transports", kTransports);
  append(out, "adapters", kAdapters);
  append(out, "launchers", kLaunchers);
  return out;
}

}  // namespace hoop::launch
