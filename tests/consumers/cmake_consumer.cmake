# cmake -DNAME=<consumer dir> -DWORK_DIR=<dir> -DGENERATOR=<gen> -DCXX=<compiler>
#       [-DMAKE_PROGRAM=<ninja>] [-DCONFIGURE_ARGS=a|b|c] -P cmake_consumer.cmake
#
# Configures, builds and runs the CMake consumer project tests/consumers/<NAME>, then checks
# that its build has no target of the library's tests or examples, that treesync's headers are
# included as system headers, and that its `cmake --install` installs only its own program.

cmake_minimum_required(VERSION 3.14)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
treesync_require(NAME WORK_DIR GENERATOR CXX)

set(source "${CMAKE_CURRENT_LIST_DIR}/${NAME}")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

set(args -S "${source}" -B "${build}" -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}")
if(MAKE_PROGRAM)
  list(APPEND args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CONFIGURE_ARGS)
  string(REPLACE "|" ";" _extra "${CONFIGURE_ARGS}")
  list(APPEND args ${_extra})
endif()

treesync_run("${CMAKE_COMMAND}" ${args})
treesync_run("${CMAKE_COMMAND}" --build "${build}")

# Nothing of the library's own test/example machinery in the consumer's build graph.
if(GENERATOR STREQUAL "Ninja")
  if(NOT MAKE_PROGRAM)
    find_program(MAKE_PROGRAM NAMES ninja ninja-build)
  endif()
  execute_process(COMMAND "${MAKE_PROGRAM}" -C "${build}" -t targets all
                  OUTPUT_VARIABLE _targets RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "ninja -t targets failed")
  endif()
  if(_targets MATCHES "(treesync_tests|treesync_version_check|treesync_compile_fail|treesync_cli|doctest)[^\n]*")
    message(FATAL_ERROR "the consumer's build contains a library test target: ${CMAKE_MATCH_0}")
  endif()
  message("build graph: no library test or example targets")

  # treesync's include directory reaches the consumer as a SYSTEM one (-isystem, not -I), so the
  # consumer's own warning flags never apply to our header
  execute_process(COMMAND "${MAKE_PROGRAM}" -C "${build}" -t commands app OUTPUT_VARIABLE _commands)
  if(NOT _commands MATCHES "-isystem" OR _commands MATCHES " -I")
    message(FATAL_ERROR "treesync's include directory should be passed with -isystem:\n${_commands}")
  endif()
  message("compile command: treesync's include directory is a system one")
endif()

treesync_run_app("${build}/app" "${WORK_DIR}/tree")
if(EXISTS "${build}/app_core")  # find_package/: the same program over treesync::core
  treesync_run_app("${build}/app_core" "${WORK_DIR}/tree-core")
endif()

treesync_run("${CMAKE_COMMAND}" --install "${build}" --prefix "${WORK_DIR}/prefix")
treesync_expect_tree("${WORK_DIR}/prefix" bin/app)
