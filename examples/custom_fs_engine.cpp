// custom_fs_engine.cpp - the engine for custom::memory_fs, compiled here once
//
// custom_fs.hpp declares it (TREESYNC_ENGINE_EXTERN), so the programs that call sync() with a
// memory_fs (custom_fs.cpp, tests/test_conformance.cpp) compile only sync()'s adapter and link
// this file's object.
#include "custom_fs.hpp"

TREESYNC_ENGINE_INSTANTIATE(custom::memory_fs);
