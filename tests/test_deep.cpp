// Deep trees: no recursion, and a bounded number of open descriptors however deep the tree is.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include "support/deep_tree.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace {
using namespace std::chrono_literals;
using namespace treesync_test;
}  // namespace

TEST_CASE("a 2,000-level chain syncs over the mock without recursion, serial and parallel") {
  for (unsigned jobs : {1u, 4u}) {
    CAPTURE(jobs);
    treesync::mock_fs fs;
    std::string p = "/src";
    for (int i = 0; i < 2000; ++i) p += "/d";  // the mock's path strings make deeper chains slow
    fs.write(p + "/leaf.txt", "leaf");
    fs.advance(10s);
    const auto r = treesync::sync(fs, "/src", "/dst", treesync::jobs{jobs});
    CHECK(r.ok());
    CHECK(r.created == 2000 + 2);
    CHECK(fs.read("/dst" + p.substr(4) + "/leaf.txt") == "leaf");
    fs.advance(10s);
    fs.reset_counters();
    CHECK(treesync::sync(fs, "/src", "/dst", treesync::jobs{jobs}).unchanged());
    CHECK(fs.ops().writes() == 0);
  }
}

TEST_CASE("posix: a 10,000-level chain, far past PATH_MAX, syncs with a small descriptor limit") {
  deep_scratch s("deep");
  const std::string src = s.path + "/src", dst = s.path + "/dst";
  REQUIRE(::mkdir(src.c_str(), 0755) == 0);
  const int depth = 10000;  // "/d" x 10,000: 20,000 bytes of path, five times PATH_MAX
  REQUIRE(make_chain(src, depth, 1500000000));  // the leaf's mtime far in the past
  fd_limit limit(512);  // the first 128 levels keep their two handles open
  for (unsigned jobs : {1u, 3u}) {
    CAPTURE(jobs);
    const auto cold = treesync::sync(src, dst, treesync::jobs{jobs});
    const std::string first_error = cold.errors.empty() ? std::string() : treesync::to_string(cold.errors[0].operation) + std::string(" ") + cold.errors[0].code.message();
    INFO(first_error);
    CHECK(cold.ok());
    CHECK(chain_leaf(dst, depth) == "leaf");
    const auto warm = treesync::sync(src, dst, treesync::jobs{jobs});
    CHECK(warm.ok());
    CHECK(warm.unchanged());
    std::system(("rm -rf '" + dst + "'").c_str());
  }
}
