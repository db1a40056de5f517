// MPI initialization and finalization, the checks that hoop's job is MPI_COMM_WORLD, options,
// and the collective helpers (duplication, string exchange) bounded by deadlines.
#include <fmt/format.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/config.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_world.h"

namespace hoop::mpi {
namespace {

// Set once hoop has called MPI_Init_thread itself: then hoop also finalizes, at exit.
std::atomic<bool> hoop_initialized{false};

void finalize_at_exit() {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Tests `request` (under the lock) until it completes or `deadline` passes, yielding between
// tests; a deadline that passes leaves the request pending, which is only sound for
// collectives that a missing rank would never finish anyway.
Status drive(MPI_Request& request, Deadline deadline, const std::string& what) {
  while (true) {
    int done = 0;
    int rc = MPI_SUCCESS;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return io_error(fmt::format("mpi: {}: {}", what, error_text(rc)));
    if (done) return Status::success();
    if (Clock::now() >= deadline)
      return timeout_error(fmt::format(
          "mpi: {} did not complete before the deadline (HOOP_START_TIMEOUT): some rank of "
          "MPI_COMM_WORLD did not take part",
          what));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

std::mutex& mpi_mutex() {
  static std::mutex mu;
  return mu;
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

std::uint32_t next_serial() {
  static std::atomic<std::uint32_t> serial{0};
  return ++serial;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string v(text, static_cast<std::size_t>(length));
  // Open MPI's string goes on over several lines (repository, release date).
  // Its length counts the terminating NUL too, which used to end up inside the printed line.
  v = v.substr(0, v.find_first_of(std::string_view("\r\n\0", 3)));
  while (!v.empty() && (v.back() == ' ' || v.back() == ',')) v.pop_back();
  return v;
}

bool mpi_usable(std::string* why) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  std::string reason;
  if (finalized) {
    reason = "MPI was already finalized in this process";
  } else if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    reason = "this process was not launched by mpirun (OMPI_COMM_WORLD_SIZE is not set)";
  }
  if (!reason.empty() && why != nullptr) *why = "mpi: " + reason;
  return reason.empty();
}

Status ensure_world(int rank, int size) {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return invalid_argument("mpi: MPI was already finalized in this process");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return io_error(fmt::format("mpi: MPI_Init_thread: {}", error_text(rc)));
    hoop_initialized = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  // hoop serializes its own calls, but makes them from its background thread.
  if (provided < MPI_THREAD_SERIALIZED)
    return invalid_argument(fmt::format(
        "mpi: MPI provides thread level {} but hoop needs MPI_THREAD_SERIALIZED or more (it calls "
        "MPI from its background thread); initialize MPI with MPI_Init_thread",
        provided));
  int world_rank = -1, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank != rank || world_size != size)
    return invalid_argument(fmt::format(
        "mpi: hoop's rank {} of {} is rank {} of {} in MPI_COMM_WORLD; the MPI transport needs "
        "the same numbering (the whole world, launched by mpirun)",
        rank, size, world_rank, world_size));
  return Status::success();
}

Result<MPI_Comm> duplicate_world(Deadline deadline, const char* purpose) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    const int rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request);
    if (rc != MPI_SUCCESS)
      return io_error(fmt::format("mpi: MPI_Comm_idup ({}): {}", purpose, error_text(rc)));
  }
  HOOP_RETURN_IF_ERROR(drive(request, deadline, fmt::format("duplicating MPI_COMM_WORLD ({})",
                                                            purpose)));
  std::lock_guard<std::mutex> lock(mpi_mutex());
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

Result<MpiOptions> mpi_options_from_env() {
  MpiOptions o;
  HOOP_ASSIGN_OR_RETURN(const std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  o.spin = std::chrono::microseconds(spin);
  HOOP_ASSIGN_OR_RETURN(o.connect_timeout, config::get_milliseconds("HOOP_START_TIMEOUT"));
  return o;
}

Result<std::vector<std::string>> allgather_strings(const std::string& mine,
                                                   std::chrono::milliseconds timeout) {
  constexpr std::size_t kSlot = 256;  // one length byte, then up to 255 bytes
  if (mine.size() >= kSlot)
    return invalid_argument(fmt::format("mpi: '{}' is longer than 255 bytes", mine));
  const Deadline deadline = Clock::now() + timeout;
  HOOP_ASSIGN_OR_RETURN(MPI_Comm comm, duplicate_world(deadline, "string exchange"));
  int size = 0;
  char slot[kSlot] = {};
  slot[0] = static_cast<char>(mine.size());
  std::memcpy(slot + 1, mine.data(), mine.size());
  std::vector<char> all;
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    MPI_Comm_size(comm, &size);
    all.resize(kSlot * static_cast<std::size_t>(size));
    const int rc = MPI_Iallgather(slot, kSlot, MPI_CHAR, all.data(), kSlot, MPI_CHAR, comm,
                                  &request);
    if (rc != MPI_SUCCESS) return io_error(fmt::format("mpi: MPI_Iallgather: {}", error_text(rc)));
  }
  // On a timeout the communicator and buffer must outlive the pending collective: both leak.
  Status done = drive(request, deadline, "exchanging host identities");
  if (!done.ok()) {
    new std::vector<char>(std::move(all));
    return done;
  }
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) {
    const char* s = all.data() + kSlot * static_cast<std::size_t>(r);
    out.emplace_back(s + 1, static_cast<unsigned char>(s[0]));
  }
  std::lock_guard<std::mutex> lock(mpi_mutex());
  MPI_Comm_free(&comm);
  return out;
}

}  // namespace hoop::mpi
