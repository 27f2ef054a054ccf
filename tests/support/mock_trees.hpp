// tests/support/mock_trees.hpp - mock_fs source trees shared by the reliability tests
// (test_faults.cpp, test_faults_parallel.cpp, test_midrun.cpp), and names for mock_fs::op.
//
//   stamp_entries(fs, "/src", first, step)  gives every entry below a root but symlinks an mtime:
//                                            `first`, then one `step` later per entry (in path
//                                            order; a symlink takes a step too);
//   base_tree(fs)                            files, an empty file, an executable, nested, empty
//                                            and read-only directories, links to a file and to a
//                                            directory, and entries churn() swaps for another type;
//   churn(fs)                                adds, deletes, modifications, every type swap, a
//                                            retarget, an extraneous destination entry and a
//                                            leftover temporary;
//   op_name(k)                               "list", "stat", ... for messages.
#ifndef TREESYNC_TESTS_SUPPORT_MOCK_TREES_HPP
#define TREESYNC_TESTS_SUPPORT_MOCK_TREES_HPP

#include <treesync/mock_fs.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace treesync_test {

inline const char* op_name(treesync::mock_fs::op k) {
  static const char* const names[treesync::mock_fs::op_count] = {
      "list",  "stat",  "open_dir", "open_read", "open_write", "rename", "unlink", "rmdir",   "chmod",
      "utime", "mkdir", "symlink",  "readlink",  "chown",      "mknod",  "link",   "setxattr", "fsync"};
  const auto i = static_cast<std::size_t>(k);
  return i < treesync::mock_fs::op_count ? names[i] : "?";
}

inline void stamp_entries(treesync::mock_fs& fs, const std::string& root, std::int64_t first, std::int64_t step) {
  std::int64_t t = first;
  for (const auto& [rel, n] : fs.tree(root)) {
    if (n.type != treesync::file_type::symlink) fs.set_mtime(root + "/" + rel, t);
    t += step;
  }
}

/// /src: files, an empty file, an executable, nested and empty and read-only directories, a link
/// to a file and a link to a directory, s1..s7 (entries whose type churn() swaps); old
/// nanosecond mtimes; the clock then moves on.
inline void base_tree(treesync::mock_fs& fs) {
  using namespace std::chrono_literals;
  constexpr std::int64_t second = 1000000000;
  fs.write("/src/a.txt", "alpha", 0640);
  fs.write("/src/empty", "", 0600);
  fs.write("/src/bin/tool", "#!/bin/sh\necho hi\n", 0755);
  fs.write("/src/include/x/y.h", "int y;");
  fs.write("/src/include/z.h", "int z;");
  fs.write("/src/ro/file", "in a read-only dir");
  fs.mkdir("/src/emptydir", 0700);
  fs.symlink("/src/la", "a.txt");
  fs.symlink("/src/ld", "bin");
  // entries whose type the churn swaps
  fs.write("/src/s1", "file, then a directory");
  fs.write("/src/s2/child", "a directory, then a file");
  fs.write("/src/s3", "file, then a symlink");
  fs.symlink("/src/s4", "a.txt");  // a symlink, then a file
  fs.write("/src/s5/child", "a directory, then a symlink");
  fs.symlink("/src/s6", "bin");    // a symlink, then a directory
  fs.symlink("/src/s7", "a.txt");  // retargeted
  stamp_entries(fs, "/src", 1600000000 * second + 123456789, second + 7);
  fs.chmod("/src/ro", 0555);
  fs.set_mtime("/src/ro", 1500000000 * second + 1);
  fs.set_mtime("/src", 1500000000 * second + 2);
  fs.advance(10s);
}

/// Adds, deletes, modifications (same size and new size), a chmod, every type swap, a retarget,
/// an extraneous destination entry and a leftover temporary of an interrupted run (base_tree(),
/// synced to /dst).
inline void churn(treesync::mock_fs& fs) {
  using namespace std::chrono_literals;
  fs.write("/src/new.txt", "new file");
  fs.write("/src/newdir/deep/n.h", "new nested");
  fs.remove("/src/empty");
  fs.remove("/src/include/x");
  fs.write("/src/a.txt", "ALPHA");  // same size, new mtime
  fs.write("/src/include/z.h", "int z; int zz;");
  fs.chmod("/src/bin/tool", 0700);
  fs.remove("/src/s1");
  fs.write("/src/s1/inner", "now inside a directory");
  fs.remove("/src/s2");
  fs.write("/src/s2", "now a file");
  fs.remove("/src/s3");
  fs.symlink("/src/s3", "new.txt");
  fs.remove("/src/s4");
  fs.write("/src/s4", "was a symlink");
  fs.remove("/src/s5");
  fs.symlink("/src/s5", "newdir");
  fs.remove("/src/s6");
  fs.write("/src/s6/x", "was a symlink, now a directory");
  fs.symlink("/src/s7", "new.txt");
  fs.write("/dst/junk/j", "extraneous");
  fs.write("/dst/.treesync-tmp-4242-1", "left by a crash");
  fs.advance(10s);
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_MOCK_TREES_HPP
