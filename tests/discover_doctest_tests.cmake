# Test discovery for doctest_discover_tests(), used instead of doctest's doctestAddTests.cmake
# (tests/CMakeLists.txt points _DOCTEST_DISCOVER_TESTS_SCRIPT here). Same inputs (-D variables
# set by doctest.cmake's POST_BUILD step), same output (a CTest script in CTEST_FILE), but any
# test-case name survives: doctest 2.4.9's script turns the listing into a CMake list, so a name
# with an unbalanced '[' or ']' (e.g. "glob: ']' right after '['") swallows every following name
# into one bogus test, and a ';' splits a name in two. Here the listing is cut line by line with
# string(FIND), every name is written as a bracket argument, and the --test-case filter escapes
# ',' and '\' the way doctest parses it.
#
# Supported: TEST_PREFIX, TEST_SUFFIX, TEST_SPEC, TEST_EXTRA_ARGS, TEST_PROPERTIES (name/value
# pairs), TEST_LIST, TEST_JUNIT_OUTPUT_DIR, TEST_WORKING_DIR, TEST_EXECUTOR. Not: ADD_LABELS.
# Two more, not set by doctest.cmake (tests/sshfs/sshfs.cmake sets them): TEST_FILTERS, doctest
# filter options (--source-file=..., --test-case-exclude=...) given to the listing and to every
# test; TEST_LAUNCHER, a command each test is run through (not the listing).

cmake_minimum_required(VERSION 3.14)

if(TEST_ADD_LABELS)
  message(FATAL_ERROR "discover_doctest_tests.cmake: ADD_LABELS is not supported")
endif()
if(NOT EXISTS "${TEST_EXECUTABLE}")
  message(FATAL_ERROR "test executable '${TEST_EXECUTABLE}' does not exist")
endif()

set(_spec "")
if(NOT "${TEST_SPEC}" STREQUAL "")
  set(_spec "--test-case=${TEST_SPEC}")
endif()
execute_process(
  COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" ${_spec} ${TEST_FILTERS} --list-test-cases
  WORKING_DIRECTORY "${TEST_WORKING_DIR}"
  OUTPUT_VARIABLE _listing
  ERROR_VARIABLE _errors
  RESULT_VARIABLE _result)
if(NOT _result EQUAL 0)
  message(FATAL_ERROR "'${TEST_EXECUTABLE} --list-test-cases' failed (${_result}):\n${_listing}${_errors}")
endif()

# bracket(<out> <text>): <text> as a CMake bracket argument, [=[...]=] with enough '='
function(bracket out text)
  set(_eq "=")
  while(TRUE)
    string(FIND "${text}]" "]${_eq}]" _pos)   # "${text}]": a text ending in "]=" must not close early
    if(_pos EQUAL -1)
      break()
    endif()
    string(APPEND _eq "=")
  endwhile()
  set(${out} "[${_eq}[${text}]${_eq}]" PARENT_SCOPE)
endfunction()

# the fixed arguments, already quoted
set(_fixed "")
foreach(_arg IN LISTS TEST_FILTERS TEST_EXTRA_ARGS)
  bracket(_q "${_arg}")
  string(APPEND _fixed " ${_q}")
endforeach()
bracket(_exe "${TEST_EXECUTABLE}")
set(_executor "")
foreach(_arg IN LISTS TEST_LAUNCHER TEST_EXECUTOR)
  bracket(_q "${_arg}")
  string(APPEND _executor "${_q} ")
endforeach()
bracket(_workdir "${TEST_WORKING_DIR}")
set(_properties "")
foreach(_arg IN LISTS TEST_PROPERTIES)
  bracket(_q "${_arg}")
  string(APPEND _properties " ${_q}")
endforeach()

# a filter that selects no test case would pass silently: make that a failure
set(_no_match " FAIL_REGULAR_EXPRESSION [=[\\[doctest\\] test cases: 0 ]=]")

set(_script "")
set(_names "")
set(_seen "")
set(_count 0)
set(_rest "${_listing}")
while(NOT "${_rest}" STREQUAL "")
  string(FIND "${_rest}" "\n" _nl)
  if(_nl EQUAL -1)
    set(_line "${_rest}")
    set(_rest "")
  else()
    string(SUBSTRING "${_rest}" 0 ${_nl} _line)
    math(EXPR _nl "${_nl} + 1")
    string(SUBSTRING "${_rest}" ${_nl} -1 _rest)
  endif()
  string(REGEX REPLACE "\r$" "" _line "${_line}")
  if("${_line}" STREQUAL "" OR "${_line}" MATCHES "^===+$" OR "${_line}" MATCHES "^\\[doctest\\] ")
    continue()
  endif()

  set(_name "${TEST_PREFIX}${_line}${TEST_SUFFIX}")
  # Two TEST_CASEs of the same name would be two ctest tests of the same name; the filter below
  # runs both anyway, so register the name once and say so.
  string(SHA1 _key "${_name}")
  if(_key IN_LIST _seen)
    message(WARNING "duplicate doctest test-case name '${_line}': one ctest entry runs all of them")
    continue()
  endif()
  list(APPEND _seen ${_key})
  math(EXPR _count "${_count} + 1")

  # doctest splits --test-case on ',' unless escaped, and '\' escapes; '*' and '?' stay wildcards,
  # which still match the name itself
  string(REPLACE "\\" "\\\\" _filter "${_line}")
  string(REPLACE "," "\\," _filter "${_filter}")
  bracket(_qname "${_name}")
  bracket(_qfilter "--test-case=${_filter}")
  set(_junit "")
  if(NOT "${TEST_JUNIT_OUTPUT_DIR}" STREQUAL "")
    string(REGEX REPLACE "[^-._a-zA-Z0-9+]" "-" _file "${_name}")
    bracket(_qout "--out=${TEST_JUNIT_OUTPUT_DIR}/${_file}.xml")
    set(_junit " --reporters=junit ${_qout}")
  endif()
  string(APPEND _script
    "add_test(${_qname} ${_executor}${_exe} ${_qfilter}${_junit}${_fixed})\n"
    "set_tests_properties(${_qname} PROPERTIES WORKING_DIRECTORY ${_workdir}${_no_match}${_properties})\n")
  string(APPEND _names " ${_qname}")
endwhile()

if(_count EQUAL 0)
  message(FATAL_ERROR "'${TEST_EXECUTABLE} --list-test-cases' listed no test case")
endif()
if(TEST_LIST)
  string(APPEND _script "set(${TEST_LIST}${_names})\n")
endif()
file(WRITE "${CTEST_FILE}" "${_script}")
