// What the MPI transport's files share: the process-wide lock around hoop's MPI calls, MPI
// error text, and duplicating MPI_COMM_WORLD with a deadline.
#pragma once

// Only MPI's C API is used; Open MPI's and MPICH's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>

#include "hoop/core.h"
#include "hoop/transport.h"

namespace hoop::mpi {

/// Held around every MPI call hoop makes: with MPI_THREAD_SERIALIZED (or an application that
/// initialized MPI so) no two of hoop's threads may be inside MPI at once, and a runtime with
/// several process sets drives transports from several threads.
std::mutex& mpi_mutex();

/// MPI's text for error code `code`, e.g. "MPI_ERR_TRUNCATE: message truncated".
std::string error_text(int code);

/// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, made with MPI_Comm_idup and driven
/// until `deadline` (a rank that never joins fails every other rank with timeout_error).
/// Takes mpi_mutex() only while inside MPI.
Result<MPI_Comm> duplicate_world(Deadline deadline, const char* purpose);

/// A serial number for each transport this process creates; equal on every rank of the job,
/// since transports are created collectively and in the same order.
std::uint32_t next_serial();

}  // namespace hoop::mpi
