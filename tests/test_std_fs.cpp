// std_fs, the portable backend: the same mirror as posix_fs on the same tree.
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include "support/temp_dir.hpp"

#include <fstream>
#include <map>

namespace {
namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  fs::last_write_time(p, fs::last_write_time(p) - std::chrono::hours(24));
}

// relative path -> (type, bytes or target, perms, mtime)
std::map<std::string, std::string> manifest(const fs::path& root) {
  std::map<std::string, std::string> m;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const auto rel = fs::relative(it->path(), root).generic_string();
    const auto st = it->symlink_status();
    std::string v = std::to_string(static_cast<int>(st.type())) + " " + std::to_string(static_cast<int>(st.permissions()));
    if (fs::is_regular_file(st)) {
      std::ifstream in(it->path(), std::ios::binary);
      v += " " + std::string(std::istreambuf_iterator<char>(in), {});
    }
    if (!fs::is_symlink(st))
      v += " " + std::to_string(fs::last_write_time(it->path()).time_since_epoch().count());
    m[rel] = v;
  }
  return m;
}
}  // namespace

TEST_CASE("std_fs: a cold and a warm run give the mirror posix_fs gives") {
  treesync_test::temp_dir t;
  write(t.path() / "src/a.txt", "alpha");
  write(t.path() / "src/sub/b.txt", "beta");
  write(t.path() / "src/sub/deeper/c.txt", "gamma");
  fs::create_symlink("a.txt", t.path() / "src/link");
  fs::permissions(t.path() / "src/sub/b.txt", fs::perms(0600), fs::perm_options::replace);
  treesync::std_fs portable;
  const auto r = treesync::sync(portable, t.path() / "src", t.path() / "portable");
  CHECK(r.ok());
  (void)treesync::sync(t.path() / "src", t.path() / "posix");
  CHECK(manifest(t.path() / "portable") == manifest(t.path() / "posix"));
  CHECK(treesync::sync(portable, t.path() / "src", t.path() / "portable").unchanged());
}

TEST_CASE("std_fs: changes converge and extraneous entries are deleted") {
  treesync_test::temp_dir t;
  write(t.path() / "src/a.txt", "alpha");
  write(t.path() / "src/sub/b.txt", "beta");
  treesync::std_fs portable;
  (void)treesync::sync(portable, t.path() / "src", t.path() / "dst");
  write(t.path() / "src/a.txt", "ALPHA, longer");
  fs::remove_all(t.path() / "src/sub");
  write(t.path() / "src/sub", "now a file");
  write(t.path() / "dst/extra.txt", "x");
  const auto r = treesync::sync(portable, t.path() / "src", t.path() / "dst");
  CHECK(r.ok());
  CHECK(manifest(t.path() / "src") == manifest(t.path() / "dst"));
}

TEST_CASE("std_fs: the guards refuse the same and nested directories") {
  treesync_test::temp_dir t;
  write(t.path() / "src/a.txt", "alpha");
  treesync::std_fs portable;
  std::error_code ec;
  (void)treesync::sync(portable, t.path() / "src", t.path() / "src", ec);
  CHECK(ec == treesync::errc::same_directory);
  (void)treesync::sync(portable, t.path() / "src", t.path() / "src/inner", ec);
  CHECK(ec == treesync::errc::nested_directory);
}

TEST_CASE("std_fs: a run asking for what the filesystem declares it cannot do is refused before anything is written") {
  treesync_test::temp_dir t;
  write(t.path() / "src/a.txt", "alpha");
  treesync::std_fs sfs;
  std::error_code ec;
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    treesync::options o;
    o.owner = i == 0;
    o.specials = i == 1;
    o.hard_links = i == 2;
    o.xattrs = i == 3;
    o.durable = i == 4;
    const auto r = treesync::sync(sfs, t.path() / "src", t.path() / "dst", o, ec);
    CHECK(ec == treesync::errc::unsupported);
    CHECK(r.created == 0);
    CHECK_FALSE(fs::exists(t.path() / "dst"));
  }
  (void)treesync::sync(sfs, t.path() / "src", t.path() / "dst", ec);
  CHECK_FALSE(ec);
  CHECK(fs::exists(t.path() / "dst/a.txt"));
}
