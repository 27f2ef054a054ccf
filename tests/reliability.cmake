# tests/reliability.cmake - issue 6's real-filesystem crash test and the fuzzers, registered with
# ctest (included from tests/CMakeLists.txt).  The doctest parts of issue 6 (test_faults.cpp,
# test_midrun.cpp, test_property.cpp, test_hostile.cpp) are listed in tests/test_sources.txt.
#
#   treesync.crash      tests/crash/crash_test.sh on the CLI: SIGKILL at random moments, cold and
#                       churn, then no partial file at a final name and exact convergence (~15 s)
#   treesync.crash.state  the same, every run with --state and --verify=none
#   treesync.fuzz       tests/fuzz/run.sh: each libFuzzer target for TREESYNC_FUZZ_SECONDS (30);
#                       only with clang++ and without TREESYNC_SANITIZE (one CI configuration);
#                       skipped when libFuzzer is missing

option(TREESYNC_TEST_CRASH "Register the SIGKILL crash-consistency test of the CLI (needs bash, the examples)" ON)
set(TREESYNC_FUZZ_SECONDS 30 CACHE STRING "Seconds each fuzz target runs under ctest (0: do not register)")

find_program(TREESYNC_BASH bash)

if(TREESYNC_TEST_CRASH AND TREESYNC_BUILD_EXAMPLES AND TREESYNC_BASH AND UNIX)
  # the CLI target is examples/' treesync_cli (output name `treesync`), defined after tests/
  add_test(NAME treesync.crash
           COMMAND "${TREESYNC_BASH}" "${CMAKE_CURRENT_SOURCE_DIR}/crash/crash_test.sh"
                   "$<TARGET_FILE:treesync_cli>" 6)
  # stress: SIGKILL at random moments, ~15 s a run (`ctest -L stress --repeat until-fail:20`)
  set_tests_properties(treesync.crash PROPERTIES LABELS "reliability;stress" TIMEOUT 300 COST 6)
  # the same with a state file trusted fully (--state, --verify=none): a killed run leaves none
  # that misleads the next (issue 15)
  add_test(NAME treesync.crash.state
           COMMAND "${TREESYNC_BASH}" "${CMAKE_CURRENT_SOURCE_DIR}/crash/crash_test.sh"
                   "$<TARGET_FILE:treesync_cli>" 6 --state)
  set_tests_properties(treesync.crash.state PROPERTIES LABELS "reliability;stress" TIMEOUT 300 COST 6)
endif()

if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND NOT TREESYNC_SANITIZE AND TREESYNC_BASH
   AND TREESYNC_FUZZ_SECONDS GREATER 0)
  add_test(NAME treesync.fuzz
           COMMAND "${TREESYNC_BASH}" "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh" "${TREESYNC_FUZZ_SECONDS}"
                   "${CMAKE_CURRENT_BINARY_DIR}/fuzz")
  # COST (issue 44): three targets' seconds and their builds; under ctest -j it starts first
  math(EXPR _treesync_fuzz_cost "3 * ${TREESYNC_FUZZ_SECONDS} + 15")
  set_tests_properties(treesync.fuzz PROPERTIES
    COST ${_treesync_fuzz_cost}
    LABELS "reliability;fuzz"
    TIMEOUT 600
    ENVIRONMENT "TREESYNC_FUZZ_CXX=${CMAKE_CXX_COMPILER}"
    SKIP_RETURN_CODE 77)
endif()
