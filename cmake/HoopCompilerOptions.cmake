# Compiler settings for hoop's own targets. Third-party headers are found as SYSTEM
# includes, so -Werror applies to our code only.

if(HOOP_SANITIZE)
  # Applied globally so that every object (tests included) shares one runtime.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# hoop_target_defaults(<target>): warnings (as errors with HOOP_WERROR) and include paths.
function(hoop_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
                                           -Wimplicit-fallthrough)
  if(HOOP_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
endfunction()
