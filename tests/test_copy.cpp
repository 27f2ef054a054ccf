// posix_fs's data copy: the ladder's method is reported, and holes stay holes.
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include "support/temp_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

namespace {
using namespace treesync_test;

// A temporary directory with an empty src/ in it.
struct scratch {
  scratch() { make_dir(dir / "src"); }
  temp_dir dir;
  const std::string path = dir.path().string();
};
}  // namespace

TEST_CASE("posix: a sparse source file stays sparse in the destination, with the same bytes") {
  scratch s;
  const std::string src = s.path + "/src/sparse.img";
  const int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 32 << 20) == 0);  // 32 MiB, all hole
  const std::string data(4096, 'x');
  REQUIRE(::pwrite(fd, data.data(), data.size(), 8 << 20) == static_cast<::ssize_t>(data.size()));
  ::close(fd);
  struct stat st;
  REQUIRE(::stat(src.c_str(), &st) == 0);
  if (static_cast<long long>(st.st_blocks) * 512 >= st.st_size) {
    MESSAGE("this filesystem does not keep holes: nothing to check");
    return;
  }
  std::map<std::string, bool> sparse;
  const auto r = treesync::sync(s.path + "/src", s.path + "/dst",
                                [&](const treesync::action& a) { sparse[std::string(a.path)] = a.sparse; });
  CHECK(r.ok());
  CHECK(sparse["sparse.img"]);
  struct stat dt;
  REQUIRE(::stat((s.path + "/dst/sparse.img").c_str(), &dt) == 0);
  CHECK(dt.st_size == st.st_size);
  CHECK(dt.st_blocks * 512 < 1 << 20);  // the 4 KiB extent, not 32 MiB
  CHECK(read_file(s.path + "/dst/sparse.img") == read_file(src));
}

TEST_CASE("posix: the observer is told how each file's data was copied") {
  scratch s;
  const std::string src = s.path + "/src/data.bin";
  const int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  const std::string data(300000, 'y');
  REQUIRE(::write(fd, data.data(), data.size()) == static_cast<::ssize_t>(data.size()));
  ::close(fd);
  treesync::copy_method method = treesync::copy_method::none;
  (void)treesync::sync(s.path + "/src", s.path + "/dst", [&](const treesync::action& a) {
    if (a.type == treesync::file_type::regular) method = a.method;
  });
  CHECK(method != treesync::copy_method::none);
  CHECK(method != treesync::copy_method::memory);
  MESSAGE("copied by ", std::string(treesync::to_string(method)));
  CHECK(read_file(s.path + "/dst/data.bin") == data);
}
