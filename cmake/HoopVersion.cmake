# hoop's version: the project version, plus the commit (git describe) where the sources are a git
# checkout, as "0.1.0+<describe>". Read at configure time: a later commit shows once CMake runs
# again (every scripts/build does).
find_package(Git QUIET)
set(HOOP_GIT_DESCRIBE "")
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --tags
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE HOOP_GIT_DESCRIBE OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE git_result)
  if(NOT git_result EQUAL 0)
    set(HOOP_GIT_DESCRIBE "")
  endif()
endif()
set(HOOP_VERSION_FULL "${PROJECT_VERSION}")
if(HOOP_GIT_DESCRIBE)
  set(HOOP_VERSION_FULL "${PROJECT_VERSION}+${HOOP_GIT_DESCRIBE}")
endif()
