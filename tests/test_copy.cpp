// posix_fs's data copy: the ladder's method is reported, and holes stay holes.
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

namespace {
struct scratch {
  scratch() {
    char tmpl[] = "/tmp/treesync-copy-XXXXXX";
    path = ::mkdtemp(tmpl);
    ::mkdir((path + "/src").c_str(), 0755);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

std::string read_all(const std::string& p) {
  std::string out;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  char buf[1 << 16];
  for (::ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  if (fd >= 0) ::close(fd);
  return out;
}
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
  CHECK(read_all(s.path + "/dst/sparse.img") == read_all(src));
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
  CHECK(read_all(s.path + "/dst/data.bin") == data);
}
