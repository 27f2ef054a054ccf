# cmake -DSOURCE_DIR=<treesync source> -DWORK_DIR=<dir> -DCXX=<compiler> -P plain_include.cmake
#
# Consumer without any build-system support:
#   1. $CXX -std=c++17|c++20 -I <treesync>/include consumer.cpp
#   2. the vendored-copy case: the directory include/treesync/ copied alone into a project,
#      compiled with -I pointing there (the directory is self-sufficient);
# (That every header compiles on its own is treesync.headers_self_contained's, run in every
# configuration: tests/self_contained_headers.cmake.)

cmake_minimum_required(VERSION 3.14)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
treesync_require(SOURCE_DIR WORK_DIR CXX)
treesync_compiler(cxx)

set(warnings -Wall -Wextra -Wpedantic -Werror)
set(consumer "${CMAKE_CURRENT_LIST_DIR}/consumer.cpp")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. straight from the checkout
foreach(std 17 20)
  treesync_run(${cxx} -std=c++${std} ${warnings} -I "${SOURCE_DIR}/include" "${consumer}"
               -o "${WORK_DIR}/app-c++${std}")
  treesync_run_app("${WORK_DIR}/app-c++${std}" "${WORK_DIR}/tree-c++${std}")
endforeach()

# 2. the header directory copied on its own
file(COPY "${SOURCE_DIR}/include/treesync" DESTINATION "${WORK_DIR}/vendor")
treesync_run(${cxx} -std=c++17 ${warnings} -I "${WORK_DIR}/vendor" "${consumer}"
             -o "${WORK_DIR}/app-vendored")
treesync_run_app("${WORK_DIR}/app-vendored" "${WORK_DIR}/tree-vendored")
