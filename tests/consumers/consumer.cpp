// The program every consumer test builds, however it got hold of treesync (add_subdirectory,
// FetchContent, find_package, Meson subproject, pkg-config, plain -I): mirror a small tree made
// here and check the result.
//
//   app [WORK_DIR]      (default: ./consumer-tree)
//
// Exit status 0 and "treesync consumer OK" on success.
#include <treesync/treesync.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path work = argc > 1 ? fs::path(argv[1]) : fs::current_path() / "consumer-tree";
  const fs::path src = work / "src";
  const fs::path dst = work / "dst";
  fs::remove_all(work);

  std::string binary;  // every byte value, NUL included
  for (int value = 0; value < 256; ++value) {
    binary.push_back(static_cast<char>(value));
  }
  const std::string text = "treesync consumer test\n";
  write_file(src / "readme.txt", text);
  write_file(src / "nested" / "dir" / "all-bytes.bin", binary);

  const treesync::report report = treesync::sync(src, dst);

  int failures = 0;
  if (report.created == 0) {
    std::fprintf(stderr, "FAIL: report.created is 0 after a cold sync\n");
    ++failures;
  }
  if (read_file(dst / "readme.txt") != text) {
    std::fprintf(stderr, "FAIL: dst/readme.txt is missing or differs\n");
    ++failures;
  }
  if (!fs::is_regular_file(dst / "nested" / "dir" / "all-bytes.bin") ||
      read_file(dst / "nested" / "dir" / "all-bytes.bin") != binary) {
    std::fprintf(stderr, "FAIL: dst/nested/dir/all-bytes.bin is missing or differs\n");
    ++failures;
  }
  if (failures != 0) {
    return 1;
  }
  std::printf("treesync consumer OK: treesync %s, created %zu, scanned %zu\n", TREESYNC_VERSION_STRING,
              report.created, report.scanned);
  return 0;
}
