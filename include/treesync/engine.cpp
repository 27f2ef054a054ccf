// treesync/engine.cpp - the engine, compiled once (optional)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// treesync is header-only: by default every translation unit that calls sync() compiles the engine
// for its filesystem type.  A program may instead compile this file once (any build system: it is
// installed beside the headers) and build every other translation unit with
// -DTREESYNC_SEPARATE_CORE; those then compile only sync()'s thin adapter and call the engine for
// posix_fs and std_fs compiled here.  CMake's treesync::core and Meson's treesync_core_dep
// ('treesync-core') are exactly that, compiled three times (with -DTREESYNC_CORE_INSTANTIATE_POSIX_FS,
// -DTREESYNC_CORE_INSTANTIATE_STD_FS, then -DTREESYNC_CORE_INSTANTIATE_MOCK_FS: the test double)
// so that a program links only the engine it calls; alone, this file instantiates all three.  See include/treesync/sync.hpp, "The core compiled once".
#define TREESYNC_CORE_INSTANTIATE
#include <treesync/treesync.hpp>
#if defined(TREESYNC_CORE_INSTANTIATE_MOCK_FS)
#include <treesync/mock_fs.hpp>  // the engine for mock_fs (detail/mock_engine.hpp)
#endif
