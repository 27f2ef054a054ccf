# cmake -DBUILD_DIR=<treesync build> -DSOURCE_DIR=<treesync source> -DPREFIX=<dir> -P install.cmake
#
# `cmake --install` of the treesync build tree into PREFIX (the fixture for the find_package and
# pkg-config consumers), then checks that exactly the headers (and treesync/engine.cpp), the three
# CMake package files and treesync.pc were installed, and that the headers are the source's.

cmake_minimum_required(VERSION 3.14)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
treesync_require(BUILD_DIR SOURCE_DIR PREFIX)

file(REMOVE_RECURSE "${PREFIX}")
treesync_run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}")
# the command-line tool (TREESYNC_INSTALL_TOOLS) is checked by treesync.install_tools: a library
# consumer's prefix is compared without it
file(REMOVE_RECURSE "${PREFIX}/bin" "${PREFIX}/share/man" "${PREFIX}/share/bash-completion")

file(GLOB_RECURSE headers LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/include/*.hpp")
list(APPEND headers include/treesync/engine.cpp)  # the engine compiled once (treesync::core)
treesync_expect_tree("${PREFIX}"
  ${headers}
  share/cmake/treesync/treesyncConfig.cmake
  share/cmake/treesync/treesyncConfigVersion.cmake
  share/cmake/treesync/treesyncTargets.cmake
  share/pkgconfig/treesync.pc)

foreach(h IN LISTS headers)
  file(SHA256 "${SOURCE_DIR}/${h}" _a)
  file(SHA256 "${PREFIX}/${h}" _b)
  if(NOT _a STREQUAL _b)
    message(FATAL_ERROR "installed ${h} differs from the source")
  endif()
endforeach()

# The package must not depend on where it was installed: no absolute path of PREFIX inside.
foreach(f share/cmake/treesync/treesyncTargets.cmake share/cmake/treesync/treesyncConfig.cmake
          share/pkgconfig/treesync.pc)
  file(READ "${PREFIX}/${f}" _text)
  string(FIND "${_text}" "${PREFIX}" _pos)
  if(NOT _pos EQUAL -1)
    message(FATAL_ERROR "${f} contains the absolute install prefix: not relocatable")
  endif()
endforeach()
