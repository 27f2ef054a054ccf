# treesync.install_unbuilt: `cmake --install` installs what the build built (issue 35).  A fresh
# build directory of this source tree is configured (tools on, tests off) and installed into a fresh
# prefix with nothing built: the install succeeds with the headers and the CMake package and none of
# the tools (bin/treesync, bin/treesync_mpi, the man page, the completion), which were not built.
# (A build of --target treesync_cli alone, as examples/demo.sh does, then installs bin/treesync.)
foreach(_v SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT ${_v})
    message(FATAL_ERROR "install_unbuilt_test.cmake: -D${_v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(_build "${WORK_DIR}/build")
set(_prefix "${WORK_DIR}/prefix")
set(_cxx "")
if(CXX)
  set(_cxx "-DCMAKE_CXX_COMPILER=${CXX}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${_build}" -G "${GENERATOR}" ${_cxx}
                        -DTREESYNC_BUILD_TESTS=OFF -DTREESYNC_BUILD_EXAMPLES=ON -DTREESYNC_INSTALL_TOOLS=ON
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "configure failed (${_rc}):\n${_out}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${_build}" --prefix "${_prefix}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cmake --install of a build directory where nothing was built failed (${_rc}):\n${_out}")
endif()
include(GNUInstallDirs)
foreach(_want "${CMAKE_INSTALL_INCLUDEDIR}/treesync/treesync.hpp" "share/cmake/treesync/treesyncConfig.cmake")
  if(NOT EXISTS "${_prefix}/${_want}")
    message(FATAL_ERROR "cmake --install did not install ${_want}:\n${_out}")
  endif()
endforeach()
foreach(_unbuilt "${CMAKE_INSTALL_BINDIR}/treesync" "${CMAKE_INSTALL_BINDIR}/treesync_mpi"
                 "${CMAKE_INSTALL_MANDIR}/man1/treesync.1" "${CMAKE_INSTALL_DATADIR}/bash-completion/completions/treesync")
  if(EXISTS "${_prefix}/${_unbuilt}")
    message(FATAL_ERROR "cmake --install installed ${_unbuilt}, which was not built")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "cmake --install with nothing built: the headers and the CMake package, no tools, exit 0")
