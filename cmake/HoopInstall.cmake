# `cmake --install build --prefix P`: libhoop, the training core and the C ABI with their
# headers, hooprun, hoop-topology, hoop-bench and hoop-plan, the Python package (with hoop.jax,
# hoop.tensorflow and hoop.keras where built), a relocatable CMake package
# (find_package(hoop CONFIG): hoop::hoop, hoop::train, hoop::c) and hoop.pc for pkg-config.
# Executables and the extension find the libraries through RPATHs relative to themselves, so
# the installed tree can move.
#
# Under `pip install .` (pyproject.toml builds the target hoop_wheel) the wheel holds the package
# alone: libhoop beside the extension, hooprun and hoop-topology in hoop/bin, and the adapters
# built for the environment's frameworks in hoop/jax and hoop/tensorflow, each finding libhoop
# through a relative RPATH.
if(SKBUILD)
  if(NOT TARGET _hoop)
    message(FATAL_ERROR "the pip package needs the Python adapter: ${HOOP_PYTHON} with its headers "
                        "(python3-dev) and pybind11-dev (scripts/install-deps installs them)")
  endif()
  set_target_properties(_hoop hoop PROPERTIES INSTALL_RPATH "$ORIGIN")
  set_target_properties(hooprun hoop-topology PROPERTIES INSTALL_RPATH "$ORIGIN/..")
  install(TARGETS _hoop hoop LIBRARY DESTINATION hoop)
  # hooprun --topology runs hoop-topology from its own directory.
  install(TARGETS hooprun hoop-topology RUNTIME DESTINATION hoop/bin)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/torch/python/hoop DESTINATION .
          FILES_MATCHING PATTERN "*.py")
  add_custom_target(hoop_wheel)
  add_dependencies(hoop_wheel hoop_python hooprun hoop-topology)
  foreach(adapter jax tensorflow)
    if(TARGET hoop_${adapter})
      set_target_properties(hoop_${adapter} PROPERTIES INSTALL_RPATH "$ORIGIN/..")
      install(TARGETS hoop_${adapter} LIBRARY DESTINATION hoop/${adapter})
      install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/${adapter}/python/hoop DESTINATION .
              FILES_MATCHING PATTERN "*.py")
      add_dependencies(hoop_wheel hoop_${adapter})
    endif()
  endforeach()
  return()
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HOOP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/hoop)
# Not under a multiarch libdir (lib/x86_64-linux-gnu): Debian's python3 looks in
# lib/python3/dist-packages.
set(HOOP_INSTALL_PYTHONDIR lib/python3/dist-packages
    CACHE STRING "Where `cmake --install` puts the Python package hoop (relative to the prefix)")

file(RELATIVE_PATH hoop_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(hoop_tools hooprun hoop-topology)
foreach(tool hoop-bench hoop-plan)
  if(TARGET ${tool})
    list(APPEND hoop_tools ${tool})
  endif()
endforeach()
set_target_properties(${hoop_tools} PROPERTIES INSTALL_RPATH "$ORIGIN/${hoop_bin_to_lib}")
set_target_properties(hoop_train hoop_c PROPERTIES INSTALL_RPATH "$ORIGIN")
set_target_properties(hoop_train PROPERTIES EXPORT_NAME train)
set_target_properties(hoop_c PROPERTIES EXPORT_NAME c)

install(TARGETS hoop hoop_train hoop_c EXPORT hoopTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hoop DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/hoop/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hoop)
install(TARGETS ${hoop_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT hoopTargets NAMESPACE hoop:: DESTINATION ${HOOP_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hoopConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/hoopConfig.cmake
                              INSTALL_DESTINATION ${HOOP_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hoopConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hoopConfig.cmake ${PROJECT_BINARY_DIR}/hoopConfigVersion.cmake
        DESTINATION ${HOOP_INSTALL_CMAKEDIR})

file(RELATIVE_PATH HOOP_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
# hoop.pc for C++ (libhoop), hoop-c.pc for C programs (libhoop_c, the C ABI).
foreach(pc hoop hoop-c)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

if(TARGET _hoop)
  file(RELATIVE_PATH hoop_py_to_lib ${CMAKE_INSTALL_PREFIX}/${HOOP_INSTALL_PYTHONDIR}/hoop
       ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(_hoop PROPERTIES INSTALL_RPATH "$ORIGIN/${hoop_py_to_lib}")
  install(TARGETS _hoop LIBRARY DESTINATION ${HOOP_INSTALL_PYTHONDIR}/hoop)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/torch/python/hoop
          DESTINATION ${HOOP_INSTALL_PYTHONDIR} FILES_MATCHING PATTERN "*.py")
  # hoop.jax, hoop.tensorflow and hoop.keras where this build has them: their libraries one
  # folder deeper than the extension (hoop/jax, hoop/tensorflow), their Python files beside.
  # TensorFlow's own library is found because `import tensorflow` has loaded it already.
  foreach(adapter jax tensorflow)
    if(TARGET hoop_${adapter})
      set_target_properties(hoop_${adapter} PROPERTIES INSTALL_RPATH "$ORIGIN/../${hoop_py_to_lib}")
      install(TARGETS hoop_${adapter} LIBRARY DESTINATION ${HOOP_INSTALL_PYTHONDIR}/hoop/${adapter})
      install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/${adapter}/python/hoop
              DESTINATION ${HOOP_INSTALL_PYTHONDIR} FILES_MATCHING PATTERN "*.py")
    endif()
  endforeach()
endif()

# `cpack -G DEB` in a build directory: a .deb of what `cmake --install` installs, under /usr (the
# Python package in /usr/lib/python3/dist-packages, where Debian's python3 finds it). Configure
# it with -DCMAKE_INSTALL_PREFIX=/usr, so that GNUInstallDirs puts the libraries, the CMake
# package and the .pc files in the multiarch directory (/usr/lib/x86_64-linux-gnu). Its
# Depends are what dpkg-shlibdeps finds the binaries linking, plus python3. Build it from a
# build without CUDA (-DHOOP_CUDA=OFF): the CUDA toolkit's libraries are no Debian packages.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hoop)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "hoop developers <hoop@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
# The binaries without their debug information (libhoop's is most of its size).
set(CPACK_STRIP_FILES ON)
# hoop.torch needs torch; building against the headers needs fmt's and a compiler.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, libfmt-dev, g++, cmake, pkg-config")
include(CPack)
