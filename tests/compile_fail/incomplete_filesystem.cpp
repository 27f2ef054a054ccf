// Must not compile: a filesystem of one's own that has the operations sync() recognises it by,
// but not copy_file (nor most of the rest).
// The expected diagnostic is registered in tests/CMakeLists.txt.
#include <treesync/treesync.hpp>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

struct half_fs {
  struct dir_handle {};
  dir_handle open_root(const std::filesystem::path&, std::error_code&) { return {}; }
  std::vector<treesync::dir_entry> list(dir_handle&, std::error_code&) { return {}; }
  treesync::stat_info stat(dir_handle&, const std::string&, bool, std::error_code&) { return {}; }
  std::int64_t racy_window() { return 0; }
};

int main() {
  half_fs fs;
  (void)treesync::sync(fs, "a", "b");
}
