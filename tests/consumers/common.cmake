# Helpers for the consumer test drivers (cmake -P scripts in this directory).

# treesync_require(<var>...): fail unless every -D<var>=... was given
macro(treesync_require)
  foreach(_req IN ITEMS ${ARGN})
    if(NOT DEFINED ${_req})
      message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: -D${_req}=... is required")
    endif()
  endforeach()
endmacro()

# treesync_compiler(<var>): the command that compiles: CXX behind the compiler launcher the CMake
# builds use (tests/run.sh exports CMAKE_CXX_COMPILER_LAUNCHER=ccache where ccache is installed)
macro(treesync_compiler var)
  separate_arguments(${var} UNIX_COMMAND "$ENV{CMAKE_CXX_COMPILER_LAUNCHER}")
  list(APPEND ${var} "${CXX}")
endmacro()

# treesync_run(<command> <args>... [OUTPUT_VARIABLE <var>]): echo, run, fail on non-zero exit
function(treesync_run)
  cmake_parse_arguments(PARSE_ARGV 0 _r "" "OUTPUT_VARIABLE" "")
  string(REPLACE ";" " " _shown "${_r_UNPARSED_ARGUMENTS}")
  message("+ ${_shown}")
  execute_process(COMMAND ${_r_UNPARSED_ARGUMENTS}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  message("${_out}")
  if(NOT _rc STREQUAL "0")
    message(FATAL_ERROR "command failed (${_rc}): ${_shown}")
  endif()
  if(_r_OUTPUT_VARIABLE)
    set(${_r_OUTPUT_VARIABLE} "${_out}" PARENT_SCOPE)
  endif()
endfunction()

# treesync_run_app(<app> <work dir>): run the consumer program and check its verdict
function(treesync_run_app app work)
  treesync_run("${app}" "${work}" OUTPUT_VARIABLE _out)
  if(NOT _out MATCHES "treesync consumer OK")
    message(FATAL_ERROR "${app} did not report \"treesync consumer OK\"")
  endif()
endfunction()

# treesync_expect_tree(<dir> <relative path>...): the files under <dir> are exactly the given ones
function(treesync_expect_tree dir)
  file(GLOB_RECURSE _found LIST_DIRECTORIES false RELATIVE "${dir}" "${dir}/*")
  list(SORT _found)
  set(_expected ${ARGN})
  list(SORT _expected)
  if(NOT _found STREQUAL _expected)
    string(REPLACE ";" "\n  " _f "${_found}")
    string(REPLACE ";" "\n  " _e "${_expected}")
    message(FATAL_ERROR "unexpected contents of ${dir}\nfound:\n  ${_f}\nexpected:\n  ${_e}")
  endif()
  message("${dir} holds exactly the expected files")
endfunction()

# treesync_skip(<why>): report a skip (the test's SKIP_REGULAR_EXPRESSION matches) and stop
macro(treesync_skip why)
  message("treesync-skip: ${why}")
  return()
endmacro()
