# cmake -DSOURCE_DIR=<treesync source> -DWORK_DIR=<dir> -DCXX=<compiler> -P meson_subproject.cmake
#
# Consumer: a Meson project with treesync in subprojects/ (a symlink to this checkout plus the
# wrap file from meson_subproject/subprojects/). Builds, runs `meson test` (header-only and with
# dependency('treesync-core')), then checks that the subproject contributed only the core's libraries
# (not built by default) and that `meson install` installs only the consumer's program.
# Skipped when meson or ninja is not installed.

cmake_minimum_required(VERSION 3.14)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
treesync_require(SOURCE_DIR WORK_DIR CXX)

find_program(MESON_EXECUTABLE meson)
find_program(NINJA_EXECUTABLE NAMES ninja ninja-build samu)
if(NOT MESON_EXECUTABLE OR NOT NINJA_EXECUTABLE)
  treesync_skip("meson or ninja not found (apt-get install meson ninja-build)")
endif()

set(project "${WORK_DIR}/project")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${project}/subprojects")
file(COPY "${CMAKE_CURRENT_LIST_DIR}/meson_subproject/meson.build"
          "${CMAKE_CURRENT_LIST_DIR}/meson_subproject/subprojects"
          "${CMAKE_CURRENT_LIST_DIR}/consumer.cpp"
     DESTINATION "${project}")
file(CREATE_LINK "${SOURCE_DIR}" "${project}/subprojects/treesync" SYMBOLIC)

set(ENV{CXX} "${CXX}")
if(NOT "$ENV{CMAKE_CXX_COMPILER_LAUNCHER}" STREQUAL "")  # tests/run.sh's ccache, as for CMake builds
  set(ENV{CXX} "$ENV{CMAKE_CXX_COMPILER_LAUNCHER} ${CXX}")
endif()
# --force-fallback-for: use the subproject even if a treesync is installed on this machine
treesync_run("${MESON_EXECUTABLE}" setup "${build}" "${project}" --prefix "${WORK_DIR}/prefix"
             --force-fallback-for=treesync OUTPUT_VARIABLE setup_log)
if(NOT setup_log MATCHES "Dependency treesync found: YES")
  message(FATAL_ERROR "meson did not report the treesync dependency as found")
endif()
treesync_run("${MESON_EXECUTABLE}" compile -C "${build}")
treesync_run("${MESON_EXECUTABLE}" test -C "${build}" --print-errorlogs)

treesync_run("${MESON_EXECUTABLE}" introspect "${build}" --targets OUTPUT_VARIABLE targets)
# The subproject defines the three libraries of dependency('treesync-core') (the engine compiled
# once, one per filesystem type: posix_fs, std_fs, mock_fs), never built unless used: no tests, no
# examples, no install.
string(REGEX MATCHALL "\"subproject\": *\"treesync\"" sub_targets "${targets}")
list(LENGTH sub_targets n_sub_targets)
if(NOT n_sub_targets EQUAL 3 OR
   NOT targets MATCHES "\"name\": *\"treesync_core_posix_fs\"[^{}]*\"build_by_default\": *false" OR
   NOT targets MATCHES "\"name\": *\"treesync_core_std_fs\"[^{}]*\"build_by_default\": *false" OR
   NOT targets MATCHES "\"name\": *\"treesync_core_mock_fs\"[^{}]*\"build_by_default\": *false")
  message(FATAL_ERROR "the treesync subproject should define only treesync_core_posix_fs, "
                      "treesync_core_std_fs and treesync_core_mock_fs (not built by default); targets: ${targets}")
endif()
treesync_run("${MESON_EXECUTABLE}" install -C "${build}" --no-rebuild)
treesync_expect_tree("${WORK_DIR}/prefix" bin/app)
