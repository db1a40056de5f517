# Compiler settings for hoop's own targets. Third-party headers are found as SYSTEM
# includes, so -Werror applies to our code only.

if(HOOP_SANITIZE)
  # Applied globally so that every object (tests included) shares one runtime.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()

# hoop_target_defaults(<target>): warnings (as errors with HOOP_WERROR) and include paths.
function(hoop_target_defaults target)
  # nvcc takes its own flags: the host compiler's warnings reach the .cu files through -Xcompiler.
  set(warnings -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough)
  if(HOOP_WERROR)
    list(APPEND warnings -Werror)
  endif()
  list(JOIN warnings "," host_warnings)
  # C sources (the C ABI's example and tests) take the same warnings less the C++-only one.
  set(c_warnings ${warnings})
  list(REMOVE_ITEM c_warnings -Wnon-virtual-dtor)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${warnings}>"
                                           "$<$<COMPILE_LANGUAGE:C>:${c_warnings}>"
                                           "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${host_warnings}>")
  if(HOOP_WERROR)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  if(HOOP_NO_BUILD_TYPE_FLAGS)
    target_compile_options(${target} PRIVATE
                           "$<$<COMPILE_LANGUAGE:C,CXX>:${HOOP_NO_BUILD_TYPE_FLAGS}>")
  endif()
endfunction()
