# The layering rule, checked on every build (cmake -P cmake/CheckLayers.cmake, target
# check_layers in ALL): each folder may include its own headers, the public ones (hoop/) and
# those of the layers below it, never one above. An upward #include fails the build, naming the
# file, the header and what that folder may include.
#
#   core < device, rendezvous < transports (the registry and each transport)
#        < topology < collectives < connect (Communicator::create) < runtime, launch
#
# Adapters use the public API only, and the frameworks' adapters the dtype carriers they share
# (adapters/common); none has another exception. (The NCCL backend, which plugs into
# the collectives' device path from inside libhoop, is part of the collectives layer:
# src/collectives/nccl.)
#
# Usage: cmake -DROOT=<source dir> [-DONLY=<folder>] -P CheckLayers.cmake
if(NOT ROOT)
  message(FATAL_ERROR "CheckLayers.cmake: pass -DROOT=<source dir>")
endif()

# folder|the include prefixes (comma-separated) it may use besides "hoop/" and its own folder's
set(rules
  "src/core|"
  "src/device|core/"
  "src/rendezvous|core/"
  "transports|core/,device/"
  "src/topology|core/"
  "src/collectives|core/,device/,topology/,transports/registry.h"
  "src/connect|core/,device/,topology/,transports/registry.h,collectives/"
  "src/runtime|core/,device/"
  "src/launch|core/,device/,rendezvous/,transports/,topology/,collectives/,connect/,runtime/"
  "adapters/c|"
  "adapters/torch|"
  "adapters/train|"
  "adapters/common|"
  "adapters/jax|adapters/common/"
  "adapters/tensorflow|adapters/common/"
)

set(violations "")
foreach(rule IN LISTS rules)
  string(FIND "${rule}" "|" bar)
  string(SUBSTRING "${rule}" 0 ${bar} folder)
  math(EXPR after "${bar} + 1")
  string(SUBSTRING "${rule}" ${after} -1 more)
  string(REPLACE "," ";" more "${more}")
  set(allowed "hoop/" ${more})
  # A folder's own headers: "core/" for src/core, "transports/" for transports.
  string(REGEX REPLACE "^src/" "" own "${folder}")
  list(APPEND allowed "${own}/")
  if(ONLY AND NOT ONLY STREQUAL folder)
    continue()
  endif()
  file(GLOB_RECURSE sources "${ROOT}/${folder}/*.h" "${ROOT}/${folder}/*.cc" "${ROOT}/${folder}/*.cu")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" lines REGEX "^#include \"[^\"]+\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      # Headers next to the file ("gpu.h") and the project's own bench/tests helpers are local.
      if(NOT header MATCHES "/")
        continue()
      endif()
      set(ok FALSE)
      foreach(prefix IN LISTS allowed)
        string(LENGTH "${prefix}" len)
        string(SUBSTRING "${header}" 0 ${len} head)
        if(head STREQUAL prefix)
          set(ok TRUE)
          break()
        endif()
      endforeach()
      if(NOT ok)
        file(RELATIVE_PATH rel "${ROOT}" "${source}")
        string(REPLACE ";" ", " list_text "${allowed}")
        string(APPEND violations "\n  ${rel}: #include \"${header}\" (${folder} may include ${list_text})")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "layering: an include points upward or sideways:${violations}")
endif()
