# cmake -DPREFIX=<installed treesync> -DWORK_DIR=<dir> -DCXX=<compiler> -DVERSION=<x.y.z> -P pkg_config.cmake
#
# Consumer: plain Makefile-style use of the installed treesync.pc:
#   PKG_CONFIG_PATH=<prefix>/share/pkgconfig pkg-config --cflags treesync
#   $CXX -std=c++17 $(pkg-config --cflags treesync) consumer.cpp
# Skipped when neither pkg-config nor pkgconf is installed.

cmake_minimum_required(VERSION 3.14)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
treesync_require(PREFIX WORK_DIR CXX VERSION)
treesync_compiler(cxx)

find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG_EXECUTABLE)
  treesync_skip("pkg-config not found (apt-get install pkgconf)")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/share/pkgconfig")

function(pc out)
  execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" ${ARGN} treesync
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE ";" " " _shown "${ARGN}")
  message("$ PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH} pkg-config ${_shown} treesync\n${_out}${_err}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "pkg-config ${_shown} treesync failed")
  endif()
  set(${out} "${_out}" PARENT_SCOPE)
endfunction()

pc(modversion --modversion)
if(NOT modversion STREQUAL VERSION)
  message(FATAL_ERROR "pkg-config says version '${modversion}', expected '${VERSION}'")
endif()
pc(includedir --variable=includedir)
if(NOT EXISTS "${includedir}/treesync/treesync.hpp")
  message(FATAL_ERROR "includedir '${includedir}' has no treesync/treesync.hpp")
endif()
pc(libs --libs)
if(NOT libs STREQUAL "")
  message(FATAL_ERROR "a header-only library should have empty --libs, got '${libs}'")
endif()
pc(cflags --cflags)
if(NOT cflags MATCHES "-I")
  message(FATAL_ERROR "--cflags has no -I: '${cflags}'")
endif()
separate_arguments(cflags UNIX_COMMAND "${cflags}")

treesync_run(${cxx} -std=c++17 -Wall -Wextra -Wpedantic -Werror ${cflags}
             "${CMAKE_CURRENT_LIST_DIR}/consumer.cpp" -o "${WORK_DIR}/app")
treesync_run_app("${WORK_DIR}/app" "${WORK_DIR}/tree")

# The engine compiled once, by hand: the installed treesync/engine.cpp compiled on its own, the
# program compiled with -DTREESYNC_SEPARATE_CORE, both linked together.
treesync_run(${cxx} -std=c++17 -Wall -Wextra -Wpedantic -Werror ${cflags}
             -c "${includedir}/treesync/engine.cpp" -o "${WORK_DIR}/engine.o")
treesync_run(${cxx} -std=c++17 -Wall -Wextra -Wpedantic -Werror ${cflags} -DTREESYNC_SEPARATE_CORE
             "${CMAKE_CURRENT_LIST_DIR}/consumer.cpp" "${WORK_DIR}/engine.o" -pthread -o "${WORK_DIR}/app_core")
treesync_run_app("${WORK_DIR}/app_core" "${WORK_DIR}/tree-core")
