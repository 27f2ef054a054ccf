# cmake -DSOURCE_DIR=<treesync source> -DWORK_DIR=<dir> -DCXX=<compiler> [-DSTD=17] -P self_contained_headers.cmake
#
# Every header under include/treesync/ (the detail ones too) compiles alone in a translation unit,
# included twice (its guard works), warning-free: a part includes what it uses, whatever order a
# user includes the parts in.  Run by the ctest treesync.headers_self_contained.

cmake_minimum_required(VERSION 3.14)
foreach(_req IN ITEMS SOURCE_DIR WORK_DIR CXX)
  if(NOT DEFINED ${_req})
    message(FATAL_ERROR "${CMAKE_CURRENT_LIST_FILE}: -D${_req}=... is required")
  endif()
endforeach()
if(NOT DEFINED STD)
  set(STD 17)
endif()

file(MAKE_DIRECTORY "${WORK_DIR}")
file(GLOB_RECURSE _headers RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/treesync/*.hpp")
list(SORT _headers)
set(_failed "")
foreach(_h IN LISTS _headers)
  string(MAKE_C_IDENTIFIER "${_h}" _id)
  set(_tu "${WORK_DIR}/self_contained_${_id}.cpp")
  file(WRITE "${_tu}" "#include <${_h}>\n#include <${_h}>\nint main() {}\n")
  execute_process(COMMAND "${CXX}" -std=c++${STD} -Wall -Wextra -Wpedantic -Werror -fsyntax-only
                          -I "${SOURCE_DIR}/include" "${_tu}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(_rc STREQUAL "0")
    message("ok   ${_h}")
  else()
    message("FAIL ${_h}\n${_out}")
    list(APPEND _failed "${_h}")
  endif()
endforeach()
if(_failed)
  message(FATAL_ERROR "headers that do not compile on their own: ${_failed}")
endif()
