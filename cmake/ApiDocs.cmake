# The API reference: Doxygen (Debian's doxygen) over the public headers (include/hoop) and the
# public modules of the Python package hoop, into build/api/html. Included by CMakeLists.txt, it
# defines the target api_docs (not part of the default target) where Doxygen is found:
#   cmake --build build --target api_docs
# Run as a script (the target's command and the test docs.api_reference), it builds the
# reference and fails on any warning (an undocumented public declaration, a malformed comment):
#   cmake -DDOXYGEN=<doxygen> -DDOXYFILE=<build/api/Doxyfile> -DSOURCE_DIR=<source tree>
#         -DPYTHON_DIR=<build/api/python> -P cmake/ApiDocs.cmake
# The package's modules live in three adapters (torch: hoop, hoop.torch, hoop.ray, hoop.spark;
# jax: hoop.jax; tensorflow: hoop.tensorflow, hoop.keras); the script copies them into one tree,
# PYTHON_DIR/hoop, so that Doxygen names them as Python does (hoop.keras, not keras), leaving out
# the private modules (hoop._basics, hoop.torch._rendezvous: what they export is documented where
# a public module re-exports it). Warnings name the adapters' files.

if(CMAKE_SCRIPT_MODE_FILE)
  foreach(var DOXYGEN DOXYFILE SOURCE_DIR PYTHON_DIR)
    if(NOT ${var})
      message(FATAL_ERROR "ApiDocs.cmake: -D${var}=... is required")
    endif()
  endforeach()
  set(adapters torch jax tensorflow)
  file(REMOVE_RECURSE ${PYTHON_DIR})
  file(MAKE_DIRECTORY ${PYTHON_DIR})
  foreach(adapter IN LISTS adapters)
    file(COPY ${SOURCE_DIR}/adapters/${adapter}/python/hoop DESTINATION ${PYTHON_DIR}
         FILES_MATCHING PATTERN "*.py" PATTERN "_[a-z]*.py" EXCLUDE)
  endforeach()
  get_filename_component(workdir ${DOXYFILE} DIRECTORY)
  execute_process(COMMAND ${DOXYGEN} ${DOXYFILE} WORKING_DIRECTORY ${workdir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  # The copies' names back to the adapters' files.
  foreach(adapter IN LISTS adapters)
    set(root ${SOURCE_DIR}/adapters/${adapter}/python/hoop)
    file(GLOB_RECURSE modules RELATIVE ${root} ${root}/*.py)
    foreach(module IN LISTS modules)
      string(REPLACE "${PYTHON_DIR}/hoop/${module}:" "${root}/${module}:" err "${err}")
    endforeach()
  endforeach()
  string(STRIP "${out}" out)
  string(STRIP "${err}" err)
  if(out)
    message("${out}")
  endif()
  if(err)
    string(REGEX MATCHALL "\n" lines "\n${err}")
    list(LENGTH lines count)
    message("${err}")
    message(FATAL_ERROR "doxygen: ${count} warning line(s); the API reference must build "
                        "without any")
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "doxygen ${DOXYFILE} failed (${rc})")
  endif()
  get_filename_component(html ${DOXYFILE} DIRECTORY)
  message("API reference: ${html}/html/index.html, 0 warnings")
  return()
endif()

find_program(DOXYGEN doxygen)
hoop_optional(API_DOCS DOXYGEN "${DOXYGEN}, the target api_docs")
if(NOT HOOP_HAVE_API_DOCS)
  return()
endif()

set(HOOP_API_DOCS_DIR ${PROJECT_BINARY_DIR}/api)
set(HOOP_DOXYFILE ${HOOP_API_DOCS_DIR}/Doxyfile)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${HOOP_DOXYFILE} @ONLY)
# The command of the target and of the test docs.api_reference.
set(HOOP_API_DOCS_COMMAND
    ${CMAKE_COMMAND} -DDOXYGEN=${DOXYGEN} -DDOXYFILE=${HOOP_DOXYFILE}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DPYTHON_DIR=${HOOP_API_DOCS_DIR}/python
    -P ${PROJECT_SOURCE_DIR}/cmake/ApiDocs.cmake)
# Its inputs include build/include/hoop/version.h, which src/CMakeLists.txt configures.
add_custom_target(api_docs
  COMMAND ${HOOP_API_DOCS_COMMAND}
  COMMENT "Building the API reference (${HOOP_API_DOCS_DIR}/html/index.html)"
  VERBATIM)
