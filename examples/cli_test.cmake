# cmake -DTREESYNC_CLI=<path to treesync> -DWORK_DIR=<scratch dir> -P cli_test.cmake
#
# Drives the `treesync` example program on a small tree made here, under WORK_DIR, as a mirror
# (`--delete SRC/ DST`, rsync's spelling since issue 24):
#   cold run -> every file copied, summary mentions "created";
#   warm run -> nothing to do (fewer output lines; 0 created/updated/deleted where the summary
#               gives those counts);
#   a changed and a removed source file are mirrored; --exclude and --dry-run are honoured;
#   a missing source is refused with a non-zero exit.
# Used by CMake (examples/CMakeLists.txt) and Meson (examples/meson.build).

cmake_minimum_required(VERSION 3.14)
foreach(_var IN ITEMS TREESYNC_CLI WORK_DIR)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "cli_test.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(failures 0)
macro(fail msg)
  message(SEND_ERROR "FAIL: ${msg}")
  math(EXPR failures "${failures} + 1")
endmacro()

# run_cli(<output-var> <expected: ok|error> args...)
function(run_cli out_var expect)
  string(REPLACE ";" " " _shown "${ARGN}")
  # -v: one line per action (the tool prints only a summary line by default)
  execute_process(COMMAND "${TREESYNC_CLI}" -v --delete ${ARGN}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  message("$ treesync ${_shown}\n${_out}${_err}[exit ${_rc}]")
  if(expect STREQUAL "ok" AND NOT _rc STREQUAL "0")
    message(FATAL_ERROR "FAIL: `treesync ${_shown}` exited with ${_rc}")
  elseif(expect STREQUAL "error" AND _rc STREQUAL "0")
    message(FATAL_ERROR "FAIL: `treesync ${_shown}` succeeded but should have been refused")
  endif()
  set(${out_var} "${_out}" PARENT_SCOPE)
endfunction()

# count_of(<var> <word> <output>): the number next to <word> ("created", "updated", "deleted") in
# the summary ("3 created", "created: 3", "created=3"), or "" when the summary has no such number
function(count_of var word text)
  set(_n "")
  if(text MATCHES "([0-9]+)[ \t]+(files?[ \t]+|entries[ \t]+)?${word}")
    set(_n "${CMAKE_MATCH_1}")
  elseif(text MATCHES "${word}[ \t]*[:=]?[ \t]*([0-9]+)")
    set(_n "${CMAKE_MATCH_1}")
  endif()
  set(${var} "${_n}" PARENT_SCOPE)
endfunction()

# expect_count(<output> <word> <expected> <what>): when the summary gives a count, check it
macro(expect_count text word expected what)
  count_of(_count "${word}" "${text}")
  if(NOT _count STREQUAL "" AND NOT _count EQUAL ${expected})
    fail("${what}: summary says ${_count} ${word}, expected ${expected}")
  endif()
endmacro()

function(count_lines var text)
  string(REGEX REPLACE "[^\n]" "" _newlines "${text}")
  string(LENGTH "${_newlines}" _n)
  set(${var} ${_n} PARENT_SCOPE)
endfunction()

# expect_same(<relative path> <dst root>)
macro(expect_same rel dst)
  if(NOT EXISTS "${dst}/${rel}")
    fail("${dst}/${rel} was not created")
  else()
    file(SHA256 "${src}/${rel}" _a)
    file(SHA256 "${dst}/${rel}" _b)
    if(NOT _a STREQUAL _b)
      fail("${dst}/${rel} differs from ${src}/${rel}")
    endif()
  endif()
endmacro()

macro(expect_absent path)
  if(EXISTS "${path}" OR IS_SYMLINK "${path}")
    fail("${path} should not exist")
  endif()
endmacro()

# ---- a small source tree -------------------------------------------------------------------------
set(src "${WORK_DIR}/src")
set(dst "${WORK_DIR}/dst")
file(REMOVE_RECURSE "${WORK_DIR}")
file(WRITE "${src}/hello.txt" "hello, treesync\n")
file(WRITE "${src}/notes.tmp" "scratch file, excluded by --exclude '*.tmp'\n")
file(WRITE "${src}/sub/data.csv" "id,value\n1,3.14\n2,2.72\n")
file(WRITE "${src}/sub/deeper/empty.txt" "")
file(WRITE "${src}/sub/deeper/utf8-ñame.txt" "non-ASCII name\n")
set(files hello.txt notes.tmp sub/data.csv sub/deeper/empty.txt sub/deeper/utf8-ñame.txt)

# ---- cold run ------------------------------------------------------------------------------------
run_cli(cold ok "${src}/" "${dst}")
if(NOT cold MATCHES "created")
  fail("cold run: no summary line containing \"created\"")
endif()
count_of(n created "${cold}")
if(NOT n STREQUAL "" AND n EQUAL 0)
  fail("cold run: summary says 0 created")
endif()
expect_count("${cold}" updated 0 "cold run")
expect_count("${cold}" deleted 0 "cold run")
foreach(f IN LISTS files)
  expect_same("${f}" "${dst}")
endforeach()

# ---- warm run: nothing changed -------------------------------------------------------------------
run_cli(warm ok "${src}/" "${dst}")
if(NOT warm MATCHES "created")
  fail("warm run: no summary line containing \"created\"")
endif()
foreach(word IN ITEMS created updated deleted)
  expect_count("${warm}" ${word} 0 "warm run on an unchanged tree")
endforeach()
count_lines(cold_lines "${cold}")
count_lines(warm_lines "${warm}")
if(NOT warm_lines LESS cold_lines)
  fail("warm run printed ${warm_lines} lines, the cold run ${cold_lines}: expected no actions")
endif()

# ---- a changed file and a removed file are mirrored ----------------------------------------------
file(WRITE "${src}/hello.txt" "hello again, treesync: a longer line this time\n")
file(REMOVE "${src}/sub/deeper/empty.txt")
run_cli(changed ok "${src}/" "${dst}")
expect_count("${changed}" created 0 "run after one change and one removal")
expect_count("${changed}" updated 1 "run after one change and one removal")
expect_count("${changed}" deleted 1 "run after one change and one removal")
expect_same(hello.txt "${dst}")
expect_absent("${dst}/sub/deeper/empty.txt")

# ---- --exclude -----------------------------------------------------------------------------------
run_cli(excluded ok --exclude "*.tmp" "${src}/" "${WORK_DIR}/dst-exclude")
expect_same(hello.txt "${WORK_DIR}/dst-exclude")
expect_same(sub/data.csv "${WORK_DIR}/dst-exclude")
expect_absent("${WORK_DIR}/dst-exclude/notes.tmp")

# ---- --dry-run writes nothing --------------------------------------------------------------------
run_cli(dry ok --dry-run "${src}/" "${WORK_DIR}/dst-dry")
if(NOT dry MATCHES "created")
  fail("dry run: no summary line containing \"created\"")
endif()
expect_absent("${WORK_DIR}/dst-dry/hello.txt")
expect_absent("${WORK_DIR}/dst-dry/sub")

# ---- refusal -------------------------------------------------------------------------------------
run_cli(refused error "${WORK_DIR}/no-such-source/" "${WORK_DIR}/dst-refused")
expect_absent("${WORK_DIR}/dst-refused/hello.txt")

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} check(s) failed")
endif()
message("treesync example: all checks passed")
