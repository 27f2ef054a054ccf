# Included by the CMake consumer projects (add_subdirectory/, fetch_content/) after treesync was
# added as a subproject: treesync must contribute its library targets (treesync, and treesync_core,
# built only when linked) and nothing else.
#
#   treesync_check_subproject(<treesync source dir>)

function(treesync_check_subproject dir)
  if(NOT TARGET treesync::treesync)
    message(FATAL_ERROR "treesync::treesync is not defined")
  endif()
  get_target_property(_aliased treesync::treesync ALIASED_TARGET)
  if(NOT _aliased STREQUAL "treesync")
    message(FATAL_ERROR "treesync::treesync should be an ALIAS of treesync, is: ${_aliased}")
  endif()

  # a consumer's configure never looks for doctest
  if(DEFINED CACHE{doctest_DIR} OR DEFINED doctest_DIR)
    message(FATAL_ERROR "configuring treesync as a subproject looked for doctest (doctest_DIR is set)")
  endif()

  # no tests, examples or other targets of the library leak into the consumer's build
  get_property(_targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  get_property(_tests DIRECTORY "${dir}" PROPERTY TESTS)
  # treesync_core (treesync::core, the engine compiled once) is built only when linked
  if(NOT _targets STREQUAL "treesync;treesync_core" OR _subdirs OR _tests)
    message(FATAL_ERROR "treesync as a subproject should define only the targets treesync and treesync_core; it has "
      "targets '${_targets}', subdirectories '${_subdirs}', tests '${_tests}'")
  endif()
  foreach(_leak IN ITEMS treesync_tests_cxx17 treesync_tests_cxx20 treesync_version_check treesync_cli)
    if(TARGET ${_leak})
      message(FATAL_ERROR "library target ${_leak} leaked into the consumer's build")
    endif()
  endforeach()
  message(STATUS "treesync subproject check: only treesync::treesync, no tests, no doctest lookup")
endfunction()
