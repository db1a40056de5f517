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

# CUDA: hoop::device's kernels (src/device) need nvcc, the rest only the runtime library.
option(HOOP_CUDA "Build the CUDA parts when nvcc is found" ON)
set(_cuda_found FALSE)
set(_cuda_detail "")
if(HOOP_CUDA)
  if(EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    # 90: H100 and H200, the GPUs hoop targets; pass another list for other GPUs.
    set(_cuda_arch_note "-DCMAKE_CUDA_ARCHITECTURES")
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
      set(_cuda_arch_note "the default, for H100/H200: -DCMAKE_CUDA_ARCHITECTURES=... for other GPUs")
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc 13 and knows no C++20 flag for it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # One CUDA runtime per process: libhoop's .cc files link CUDA::cudart (shared), and so
    # must its .cu files.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(_cuda_found TRUE)
    list(JOIN CMAKE_CUDA_ARCHITECTURES "," _cuda_archs)  # a ';' would split the summary line
    set(_cuda_detail
        "${CUDAToolkit_VERSION}, ${CMAKE_CUDA_COMPILER}, architectures ${_cuda_archs} (${_cuda_arch_note})")
  endif()
endif()
if(_cuda_found)
  hoop_optional(CUDA _cuda_found "${_cuda_detail}")
elseif(NOT HOOP_CUDA)
  set(HOOP_HAVE_CUDA OFF)
  list(APPEND HOOP_SUMMARY_LINES "  CUDA: switched off by -DHOOP_CUDA=OFF")
else()
  set(HOOP_HAVE_CUDA OFF)
  list(APPEND HOOP_SUMMARY_LINES
       "  CUDA: not found (no nvcc under /usr/local/cuda or CUDAToolkit_ROOT), switched off")
endif()

# NCCL (with the toolkit under /usr/local/cuda) is only of use to a CUDA build.
if(HOOP_HAVE_CUDA)
  find_library(HOOP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  set(_nccl_found FALSE)
  if(HOOP_NCCL_LIBRARY)
    set(_nccl_found TRUE)
  endif()
  hoop_optional(NCCL _nccl_found "${HOOP_NCCL_LIBRARY}; HOOP_GPU_BACKEND=nccl built into libhoop")
else()
  set(HOOP_HAVE_NCCL OFF)
  list(APPEND HOOP_SUMMARY_LINES "  NCCL: switched off (needs CUDA)")
endif()

find_package(ucx QUIET)
hoop_optional(UCX ucx_FOUND "${ucx_VERSION}")

find_package(MPI QUIET COMPONENTS CXX)
hoop_optional(MPI MPI_CXX_FOUND "${MPI_CXX_VERSION} ${MPI_CXX_LIBRARY_VERSION_STRING}")

find_package(Gloo QUIET)
hoop_optional(GLOO Gloo_FOUND "peer for benchmarks")

function(hoop_print_summary)
  if(CMAKE_BUILD_TYPE)
    set(_build_type "${CMAKE_BUILD_TYPE}")
  elseif(CMAKE_CONFIGURATION_TYPES)
    set(_build_type "the configuration chosen at build time")
  else()
    list(JOIN HOOP_NO_BUILD_TYPE_FLAGS " " _flags)
    set(_build_type "no build type set; hoop's own targets at ${_flags}")
  endif()
  message(STATUS
          "hoop ${PROJECT_VERSION} build summary (${_build_type}, sanitizers: ${HOOP_SANITIZE}):")
  foreach(line IN LISTS HOOP_SUMMARY_LINES)
    message(STATUS "${line}")
  endforeach()
endfunction()
