# Required and optional dependencies. Required ones stop the configure step with a message
# naming the Debian package (scripts/install-deps installs them all); optional ones switch a
# part off and say so in the summary printed at the end of configuration.

find_package(Threads REQUIRED)

macro(hoop_require_package pkg debian)
  find_package(${pkg} ${ARGN} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "hoop needs ${pkg} (Debian package ${debian}); run scripts/install-deps")
  endif()
endmacro()

hoop_require_package(OpenSSL libssl-dev)
hoop_require_package(fmt libfmt-dev)
hoop_require_package(CLI11 libcli11-dev)
hoop_require_package(nlohmann_json nlohmann-json3-dev)
# hwloc: the topology module's hardware discovery. Debian ships no CMake package for it, so
# it is found through pkg-config (the imported target PkgConfig::HWLOC).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
if(NOT HWLOC_FOUND)
  message(FATAL_ERROR "hoop needs hwloc, found through pkg-config (Debian packages libhwloc-dev "
                      "and pkg-config); run scripts/install-deps")
endif()
# The training core (adapters/train): GEMM through OpenBLAS's CBLAS interface, gzipped IDX
# files through zlib.
set(BLA_VENDOR OpenBLAS)
hoop_require_package(BLAS libopenblas-dev)
hoop_require_package(ZLIB zlib1g-dev)
find_path(HOOP_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
if(NOT HOOP_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "hoop needs cblas.h (Debian package libopenblas-dev); run scripts/install-deps")
endif()
if(HOOP_BUILD_TESTS)
  hoop_require_package(GTest libgtest-dev)
endif()
if(HOOP_BUILD_BENCH)
  hoop_require_package(benchmark libbenchmark-dev)
endif()

# Optional parts. Each sets HOOP_HAVE_<NAME> and a line for the summary.
set(HOOP_SUMMARY_LINES "")
macro(hoop_optional name found detail)
  if(${found})
    set(HOOP_HAVE_${name} ON)
    list(APPEND HOOP_SUMMARY_LINES "  ${name}: found (${detail})")
  else()
    set(HOOP_HAVE_${name} OFF)
    list(APPEND HOOP_SUMMARY_LINES "  ${name}: not found, switched off")
  endif()
endmacro()

if(EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED CUDAToolkit_ROOT)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
hoop_optional(CUDA CUDAToolkit_FOUND "${CUDAToolkit_VERSION}, ${CUDAToolkit_BIN_DIR}")

find_library(HOOP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
set(_nccl_found FALSE)
if(HOOP_NCCL_LIBRARY AND CUDAToolkit_FOUND)
  set(_nccl_found TRUE)
endif()
hoop_optional(NCCL _nccl_found "${HOOP_NCCL_LIBRARY}")

find_package(ucx QUIET)
hoop_optional(UCX ucx_FOUND "${ucx_VERSION}")

find_package(MPI QUIET COMPONENTS CXX)
hoop_optional(MPI MPI_CXX_FOUND "${MPI_CXX_VERSION} ${MPI_CXX_LIBRARY_VERSION_STRING}")

find_package(Gloo QUIET)
hoop_optional(GLOO Gloo_FOUND "peer for benchmarks")

function(hoop_print_summary)
  message(STATUS "hoop ${PROJECT_VERSION} build summary (${CMAKE_BUILD_TYPE}, sanitizers: ${HOOP_SANITIZE}):")
  foreach(line IN LISTS HOOP_SUMMARY_LINES)
    message(STATUS "${line}")
  endforeach()
endfunction()
