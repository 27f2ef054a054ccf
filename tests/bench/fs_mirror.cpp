// fs_mirror - the incremental mirror a C++ developer writes by hand with <filesystem>, as the
// benchmark's "plain std::filesystem" peer: one recursive_directory_iterator pass that copies a
// file when its size or mtime differ (and sets the mtime), then a second pass that deletes what
// the source lacks. Symlinks in the source are followed, as treesync does by default.
//
//   fs_mirror SRC DST
//
// What it does not do, as such loops usually don't: directory mtimes, atomic replacement (a file
// is rewritten in place), symlink cycles (followed until the path is too long), error recovery
// (the first error ends the run with exit status 1).
// Part of the treesync benchmark harness (tests/bench/run.sh); not run by the unit tests.
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;

namespace {

void copy_pass(const fs::path& src, const fs::path& dst) {
  fs::create_directories(dst);
  for (auto it = fs::recursive_directory_iterator(src, fs::directory_options::follow_directory_symlink);
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::directory_entry& from = *it;
    const fs::path to = dst / from.path().lexically_relative(src);
    const fs::file_status there = fs::symlink_status(to);

    if (from.is_directory()) {
      if (fs::is_directory(there)) continue;
      if (fs::exists(there)) fs::remove_all(to);   // a file where a directory belongs
      fs::create_directory(to, from.path());      // with the source's permissions
    } else if (from.is_regular_file()) {
      if (fs::is_regular_file(there) && fs::file_size(to) == from.file_size() &&
          fs::last_write_time(to) == from.last_write_time())
        continue;                                  // up to date
      if (fs::exists(there) && !fs::is_regular_file(there)) fs::remove_all(to);
      fs::copy_file(from.path(), to, fs::copy_options::overwrite_existing);
      fs::last_write_time(to, from.last_write_time());
    }
    // anything else (a dangling link, a FIFO, ...) is left alone
  }
}

void delete_pass(const fs::path& src, const fs::path& dst) {
  std::vector<fs::path> extraneous;
  for (auto it = fs::recursive_directory_iterator(dst); it != fs::recursive_directory_iterator(); ++it) {
    if (fs::exists(src / it->path().lexically_relative(dst))) continue;
    extraneous.push_back(it->path());
    it.disable_recursion_pending();                // removed as a whole below
  }
  for (const fs::path& p : extraneous) fs::remove_all(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fs_mirror SRC DST\n");
    return 2;
  }
  try {
    copy_pass(argv[1], argv[2]);
    delete_pass(argv[1], argv[2]);
  } catch (const fs::filesystem_error& e) {
    std::fprintf(stderr, "fs_mirror: %s\n", e.what());
    return 1;
  }
  return 0;
}
