// treesync/detail/config.hpp - language guard, platform switch and the standard headers every part uses
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
#ifndef TREESYNC_DETAIL_CONFIG_HPP
#define TREESYNC_DETAIL_CONFIG_HPP

#if !((defined(_MSVC_LANG) && _MSVC_LANG >= 201703L) || __cplusplus >= 201703L)
#error "treesync requires C++17 or later (e.g. -std=c++17 or cpp_std=c++17)"
#endif

#if defined(__unix__) || defined(__APPLE__)
#define TREESYNC_HAS_POSIX 1
#else
#define TREESYNC_HAS_POSIX 0
#endif

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if TREESYNC_HAS_POSIX
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#endif
#endif

#endif  // TREESYNC_DETAIL_CONFIG_HPP
