# cmake -DSOURCE_DIR=<treesync> -DBUILD_DIR=<dir> -DCXX=<compiler> [-DJOBS=n] -P run_meson.cmake
#
# The ctest test `treesync.meson`: a fresh `meson setup` of the treesync source tree (tests and
# examples on, -Dwerror=true), then a build of every target and `meson test` of every test except
# Meson's suite `long` (the doctest suite, the differential tests against rsync, the MPI runs): the
# g++ configuration that registers this test builds and runs those same sources with the same
# compiler through CMake, so building them twice only doubled its time (issue 44); then `meson
# install` into a scratch prefix, which must receive exactly the headers, treesync.pc and the tool
# with its man page and bash completion (the installed tool must run, its page render).
# -DALL=ON builds and runs everything, the suite `long` included.
# Without meson or ninja it prints "treesync-skip: ..." and succeeds; the test's
# SKIP_REGULAR_EXPRESSION turns that into a ctest "Skipped" (cmake -P cannot choose its exit code
# before CMake 3.29).

cmake_minimum_required(VERSION 3.14)
foreach(_var IN ITEMS SOURCE_DIR BUILD_DIR CXX)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "run_meson.cmake: -D${_var}=... is required")
  endif()
endforeach()
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()

find_program(MESON_EXECUTABLE meson)
find_program(NINJA_EXECUTABLE NAMES ninja ninja-build samu)
if(NOT MESON_EXECUTABLE OR NOT NINJA_EXECUTABLE)
  message("treesync-skip: meson or ninja not found (apt-get install meson ninja-build)")
  return()
endif()

# the compiler launcher the CMake builds use (tests/run.sh exports CMAKE_CXX_COMPILER_LAUNCHER=ccache
# where ccache is installed): meson takes "ccache g++" in CXX as its compiler cache
if(NOT "$ENV{CMAKE_CXX_COMPILER_LAUNCHER}" STREQUAL "")
  set(CXX "$ENV{CMAKE_CXX_COMPILER_LAUNCHER} ${CXX}")
endif()

function(run)
  string(REPLACE ";" " " _shown "${ARGN}")
  message("+ ${_shown}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "CXX=${CXX}" ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "treesync.meson: command failed (${_rc}): ${_shown}")
  endif()
endfunction()

file(REMOVE_RECURSE "${BUILD_DIR}")
set(_prefix "${BUILD_DIR}/prefix")
run("${MESON_EXECUTABLE}" setup "${BUILD_DIR}" "${SOURCE_DIR}" "--prefix=${_prefix}"
    -Dtests=enabled -Dexamples=enabled -Dwerror=true)
# the targets that only the suite `long` needs: the doctest suite (tests/meson.build)
set(_long_only treesync_tests treesync_tests_header_only)
if(ALL OR CMAKE_VERSION VERSION_LESS 3.19)  # (string(JSON) is CMake 3.19's)
  run("${MESON_EXECUTABLE}" compile -C "${BUILD_DIR}" -j "${JOBS}")
  set(_test_args)
else()
  # every other target's outputs, by name, from `meson introspect --targets`
  execute_process(COMMAND "${MESON_EXECUTABLE}" introspect --targets "${BUILD_DIR}"
                  OUTPUT_VARIABLE _json RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "treesync.meson: meson introspect --targets failed (${_rc})")
  endif()
  string(JSON _count LENGTH "${_json}")
  set(_outputs)
  set(_left_out)
  math(EXPR _last "${_count} - 1")
  foreach(_i RANGE ${_last})
    string(JSON _name GET "${_json}" ${_i} name)
    string(JSON _type GET "${_json}" ${_i} type)
    if(_type STREQUAL "run" OR _type STREQUAL "alias")
      continue()
    endif()
    if(_name IN_LIST _long_only)
      list(APPEND _left_out "${_name}")
      continue()
    endif()
    string(JSON _files GET "${_json}" ${_i} filename)
    string(JSON _nfiles LENGTH "${_files}")
    math(EXPR _lastf "${_nfiles} - 1")
    foreach(_j RANGE ${_lastf})
      string(JSON _file GET "${_files}" ${_j})
      file(RELATIVE_PATH _file "${BUILD_DIR}" "${_file}")
      list(APPEND _outputs "${_file}")
    endforeach()
  endforeach()
  list(SORT _left_out)
  set(_expected_left_out ${_long_only})
  list(SORT _expected_left_out)
  if(NOT _left_out STREQUAL _expected_left_out)
    message(FATAL_ERROR "treesync.meson: expected Meson targets ${_expected_left_out}, found ${_left_out}")
  endif()
  string(REPLACE ";" ", " _shown_left_out "${_left_out}")
  message("treesync.meson: building every target but ${_shown_left_out} (suite `long`: built and run by ctest from CMake)")
  run("${NINJA_EXECUTABLE}" -C "${BUILD_DIR}" -j "${JOBS}" ${_outputs})
  set(_test_args --no-suite long)
endif()
run("${MESON_EXECUTABLE}" test -C "${BUILD_DIR}" --no-rebuild --print-errorlogs
    --num-processes "${JOBS}" ${_test_args})

run("${MESON_EXECUTABLE}" install -C "${BUILD_DIR}" --no-rebuild)
file(GLOB_RECURSE _installed LIST_DIRECTORIES false RELATIVE "${_prefix}" "${_prefix}/*")
file(GLOB_RECURSE _expected LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/include/*.hpp")
list(APPEND _expected share/pkgconfig/treesync.pc
     include/treesync/engine.cpp  # the engine compiled once (dependency('treesync-core'), by hand)
     # the tool (option install_tools, on at the top level): its man page and bash completion
     bin/treesync share/man/man1/treesync.1 share/bash-completion/completions/treesync)
list(SORT _installed)
list(SORT _expected)
if(NOT _installed STREQUAL _expected)
  message(FATAL_ERROR "treesync.meson: meson install put\n  ${_installed}\ninstead of\n  ${_expected}")
endif()
execute_process(COMMAND "${_prefix}/bin/treesync" --version RESULT_VARIABLE _rc OUTPUT_VARIABLE _out)
if(NOT _rc EQUAL 0 OR NOT _out MATCHES "^treesync [0-9]")
  message(FATAL_ERROR "treesync.meson: the installed bin/treesync --version failed (${_rc}): ${_out}")
endif()
find_program(MAN_EXECUTABLE man)
if(MAN_EXECUTABLE)
  execute_process(COMMAND "${MAN_EXECUTABLE}" -l "${_prefix}/share/man/man1/treesync.1"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES "--delete")
    message(FATAL_ERROR "treesync.meson: man -l of the installed page failed (${_rc}): ${_err}")
  endif()
endif()
message("meson install: exactly the headers, share/pkgconfig/treesync.pc and the tool (its man page renders)")
