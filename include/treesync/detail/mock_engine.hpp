// treesync/detail/mock_engine.hpp - the engine for mock_fs: compiled once in treesync::core
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// Included by sync.hpp and by mock_fs.hpp, whichever comes second (it needs both): under
// TREESYNC_SEPARATE_CORE (treesync::core, treesync_core_dep) a translation unit calls the mock_fs
// engine compiled in the core library (TREESYNC_CORE_INSTANTIATE_MOCK_FS) instead of compiling it.
#ifndef TREESYNC_DETAIL_MOCK_ENGINE_HPP
#define TREESYNC_DETAIL_MOCK_ENGINE_HPP

#if defined(TREESYNC_CORE_INSTANTIATE_MOCK_FS)
TREESYNC_ENGINE_INSTANTIATE(treesync::mock_fs);
#elif defined(TREESYNC_SEPARATE_CORE) || defined(TREESYNC_CORE_INSTANTIATE)
TREESYNC_ENGINE_EXTERN(treesync::mock_fs);
#endif

#endif  // TREESYNC_DETAIL_MOCK_ENGINE_HPP
