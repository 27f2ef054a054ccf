# tests/sshfs/sshfs.cmake (included by tests/CMakeLists.txt) - the real-filesystem tests over sshfs.
#
#   sshfs.fixture.start   FIXTURES_SETUP: tests/sshfs/sshfs_fixture.sh start: a private sshd on a
#                         free 127.0.0.1 port, its directory mounted with sshfs (state: build tree,
#                         tests/sshfs-state/); skipped, with the reason, where it cannot run
#   sshfs.sshfs-to-sshfs.posix: ...  tests/test_posix.cpp's cases, source and destination on the mount
#   sshfs.local-to-sshfs.posix: ...  the same cases, source on local disk, destination on the mount
#   sshfs.sshfs: ...      tests/test_sshfs.cpp: a warm no-op's requests, counted at the SFTP server
#   sshfs.fixture.stop    FIXTURES_CLEANUP: unmount, stop that sshd (also after failed tests)
#
# Every test runs through `sshfs_fixture.sh run STATE_DIR`, which points TREESYNC_TEST_TMPDIR (and
# for local-to-sshfs TREESYNC_TEST_SRC_TMPDIR) where tests/support/temp_dir.hpp creates its trees,
# or, when the fixture did not start, prints "treesync-skip: <why>" and exits 77: ctest reports the
# test as skipped, never as passed. `ctest -R sshfs` pulls in the fixture's start and stop.

set(_sshfs_script "${CMAKE_CURRENT_SOURCE_DIR}/sshfs/sshfs_fixture.sh")
set(_sshfs_state "${CMAKE_CURRENT_BINARY_DIR}/sshfs-state")
set(_sshfs_workdir "${CMAKE_CURRENT_BINARY_DIR}/work-sshfs")
file(MAKE_DIRECTORY "${_sshfs_workdir}")
find_program(TREESYNC_BASH bash)
if(NOT TREESYNC_BASH)
  message(STATUS "treesync: no bash; the sshfs tests are not registered")
  return()
endif()

add_test(NAME sshfs.fixture.start COMMAND "${TREESYNC_BASH}" "${_sshfs_script}" start "${_sshfs_state}")
add_test(NAME sshfs.fixture.stop COMMAND "${TREESYNC_BASH}" "${_sshfs_script}" stop "${_sshfs_state}")
set_tests_properties(sshfs.fixture.start PROPERTIES
  FIXTURES_SETUP treesync_sshfs SKIP_RETURN_CODE 77 LABELS sshfs TIMEOUT 120)
set_tests_properties(sshfs.fixture.stop PROPERTIES
  FIXTURES_CLEANUP treesync_sshfs LABELS sshfs TIMEOUT 120)

# treesync_sshfs_tests(<target> <prefix> <spec> <filters> <launcher...>): like doctest_discover_tests
# with TEST_SPEC <spec>, plus tests/discover_doctest_tests.cmake's TEST_FILTERS (doctest filter
# options other than --test-case, for the listing and the tests) and TEST_LAUNCHER (the fixture's
# `run`, for the tests and not for the listing).
function(treesync_sshfs_tests target prefix spec filters)
  string(SHA1 _hash "${prefix}")
  string(SUBSTRING ${_hash} 0 7 _hash)
  set(_include "${CMAKE_CURRENT_BINARY_DIR}/${target}_sshfs_include-${_hash}.cmake")
  set(_tests "${CMAKE_CURRENT_BINARY_DIR}/${target}_sshfs_tests-${_hash}.cmake")
  set(_properties FIXTURES_REQUIRED treesync_sshfs SKIP_RETURN_CODE 77 LABELS sshfs TIMEOUT 600)
  add_custom_command(
    TARGET ${target} POST_BUILD
    BYPRODUCTS "${_tests}"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_TARGET=${target}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_WORKING_DIR=${_sshfs_workdir}"
            -D "TEST_SPEC=${spec}"
            -D "TEST_FILTERS=${filters}"
            -D "TEST_LAUNCHER=${ARGN}"
            -D "TEST_PROPERTIES=${_properties}"
            -D "TEST_PREFIX=${prefix}"
            -D "CTEST_FILE=${_tests}"
            -P "${_DOCTEST_DISCOVER_TESTS_SCRIPT}"
    VERBATIM)
  file(WRITE "${_include}"
    "if(EXISTS \"${_tests}\")\n"
    "  include(\"${_tests}\")\n"
    "else()\n"
    "  add_test(${target}_sshfs_NOT_BUILT-${_hash} ${target}_sshfs_NOT_BUILT-${_hash})\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_include}")
endfunction()

# ---- tests/test_posix.cpp's cases over sshfs ---------------------------------------------------
# Excluded, each for a limit of SFTPv3/sshfs, not of treesync (they all run on local disks). Others
# adapt at run time instead: mtimes are compared at the destination's granularity, and a racy copy
# is expected smudged where there is no ctime (dst_timestamps() in tests/test_posix.cpp).
set(_sshfs_excluded_both
  # SFTPv3 keeps whole seconds: the nanosecond part this case pins cannot survive
  "posix: a cold sync keeps file mtimes to the nanosecond")
set(_sshfs_excluded_sshfs_source
  # sshfs cannot create a FIFO (mknod is not in SFTPv3: EPERM), so the source cannot have one;
  # local-to-sshfs runs the case (a local FIFO, skipped)
  "posix: a FIFO in the source is never opened, skipped and reported")

# --test-case-exclude=<the names>: ',' separates filters, so a comma (and '\') of a name is escaped
function(treesync_doctest_exclude out)
  set(_filter "")
  foreach(_name IN LISTS ARGN)
    string(REPLACE "\\" "\\\\" _name "${_name}")
    string(REPLACE "," "\\," _name "${_name}")
    if(_filter STREQUAL "")
      set(_filter "--test-case-exclude=${_name}")
    else()
      string(APPEND _filter ",${_name}")
    endif()
  endforeach()
  set(${out} "${_filter}" PARENT_SCOPE)
endfunction()

# The first standard's suite (the cases are the same in every standard); the cases of
# tests/test_posix.cpp only: other files' "posix:" cases make their trees outside test_tmpdir().
list(GET TREESYNC_TEST_STANDARDS 0 _sshfs_std)
treesync_doctest_exclude(_exclude ${_sshfs_excluded_both} ${_sshfs_excluded_sshfs_source})
treesync_sshfs_tests(treesync_tests_cxx${_sshfs_std} "sshfs.sshfs-to-sshfs." "posix: *"
  "--source-file=*test_posix.cpp;${_exclude}"
  "${TREESYNC_BASH}" "${_sshfs_script}" run "${_sshfs_state}")
treesync_doctest_exclude(_exclude ${_sshfs_excluded_both})
treesync_sshfs_tests(treesync_tests_cxx${_sshfs_std} "sshfs.local-to-sshfs." "posix: *"
  "--source-file=*test_posix.cpp;${_exclude}"
  "${TREESYNC_BASH}" "${_sshfs_script}" run "${_sshfs_state}" --local-src)

# ---- tests/test_sshfs.cpp: its own executable, run only here -----------------------------------
add_executable(treesync_sshfs_tests main.cpp test_sshfs.cpp)
target_link_libraries(treesync_sshfs_tests PRIVATE treesync_tests_cxx${_sshfs_std}_core doctest::doctest)  # the suite's engine
set_target_properties(treesync_sshfs_tests PROPERTIES
  CXX_STANDARD ${_sshfs_std} CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
treesync_developer_flags(treesync_sshfs_tests)
treesync_sshfs_tests(treesync_sshfs_tests "sshfs." "" ""
  "${TREESYNC_BASH}" "${_sshfs_script}" run "${_sshfs_state}")
