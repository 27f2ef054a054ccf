// copy_back - the build copy-back step: several build output trees synced into a source checkout,
// the way a wheel or package build puts compiled and generated files next to the sources.
//
//   copy_back [SCRATCH_DIR]
//
// A fake checkout and three build output trees are made under SCRATCH_DIR (default: a new directory
// in $TMPDIR or /tmp):
//
//   build/lib/pkg/        compiled extension + copied modules  -> checkout/src/pkg/      overlay:
//                         (with __pycache__/ and *.pyc)            the checkout's own sources stay
//   build/include/pkg/    generated public headers             -> checkout/include/pkg/  mirror: stale
//                                                                  headers are deleted (at most 20)
//   build/gen/            generated modules                    -> checkout/src/pkg/_gen/ mirror
//
// Byte-code caches are never copied (exclude `__pycache__/` and `*.pyc`).  The "build" is run
// three times: first build (everything copied), an incremental rebuild (one header changed, one
// removed, the extension relinked), and a no-op rebuild, which writes nothing at all: the checkout's
// files keep their mtimes, so the next `make` or `pip install -e .` does not rebuild anything.
// Each step prints what changed in the checkout.  Exit status 0 when every expectation held.
#include <treesync/treesync.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// The times files are written at: far from "now", so no copy is racily clean.
const fs::file_time_type first_build = fs::file_time_type::clock::now() - std::chrono::hours(2);
const fs::file_time_type rebuild = first_build + std::chrono::hours(1);

void put(const fs::path& p, const std::string& text, fs::file_time_type when = first_build) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  fs::last_write_time(p, when);
}

/// Collects one line per change, like `treesync -i` would print, for one copy-back step.
struct changes {
  std::string prefix;  // where this tree lands in the checkout, for display
  std::vector<std::string>* out;
  void operator()(const treesync::action& a) const {
    const char* what = nullptr;
    switch (a.kind) {
      case treesync::action_kind::create: what = "new     "; break;
      case treesync::action_kind::update: what = "updated "; break;
      case treesync::action_kind::update_meta: what = "touched "; break;
      case treesync::action_kind::remove: what = "deleted "; break;
      default: what = "skipped "; break;
    }
    if (a.type == treesync::file_type::directory) return;  // show files only
    out->push_back(std::string(what) + prefix + treesync::escape(a.path));
  }
};

struct step_result {
  std::vector<std::string> lines;
  std::size_t errors = 0;
  bool unchanged = true;
};

/// The copy-back: three syncs, each with the policies its destination needs.
step_result copy_back(const fs::path& build, const fs::path& checkout) {
  step_result res;
  const treesync::exclude bytecode{"__pycache__/", "*.pyc"};
  // sync() creates the destination directory itself, not its parents (like rsync without --mkpath)
  fs::create_directories(checkout / "include");
  auto add = [&](const treesync::report& r) {
    res.errors += r.errors.size();
    res.unchanged = res.unchanged && r.unchanged();
    for (const auto& e : r.errors)
      std::fprintf(stderr, "copy_back: %s %s (%s): %s\n", treesync::to_string(e.operation),
                   treesync::escape(e.path).c_str(), treesync::to_string(e.side), e.code.message().c_str());
  };
  // build/lib/pkg -> src/pkg: an overlay; the checkout holds sources the build does not produce
  add(treesync::sync(build / "lib" / "pkg", checkout / "src" / "pkg", bytecode, treesync::deletion::keep,
                     changes{"src/pkg/", &res.lines}));
  // build/include/pkg -> include/pkg: owned by the build, so mirrored; a bug that empties it must
  // not wipe the headers, hence the cap
  add(treesync::sync(build / "include" / "pkg", checkout / "include" / "pkg", bytecode, treesync::max_delete{20},
                     changes{"include/pkg/", &res.lines}));
  // build/gen -> src/pkg/_gen: mirrored
  add(treesync::sync(build / "gen", checkout / "src" / "pkg" / "_gen", bytecode,
                     changes{"src/pkg/_gen/", &res.lines}));
  std::sort(res.lines.begin(), res.lines.end());
  return res;
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "  ok  " : "  FAIL", what.c_str());
  if (!ok) ++failures;
}

void show(const char* title, const step_result& r) {
  std::printf("%s\n", title);
  if (r.lines.empty()) std::printf("  (checkout up to date: nothing written)\n");
  for (const auto& l : r.lines) std::printf("  %s\n", l.c_str());
}

bool has(const step_result& r, const std::string& line) {
  return std::find(r.lines.begin(), r.lines.end(), line) != r.lines.end();
}

// The example's directory: argv[1] (emptied), or a new one under $TMPDIR; empty on failure.
fs::path work_root(int argc, char** argv) {
  fs::path root;
  if (argc > 1) {
    root = argv[1];
    fs::remove_all(root);
    fs::create_directories(root);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/treesync-copy-back.XXXXXX";
    if (!::mkdtemp(templ.data())) return std::perror("mkdtemp"), fs::path();
    root = templ;
  }
  return root;
}

// The checkout (sources only) and the tree of the first build.
void make_trees(const fs::path& checkout, const fs::path& build) {
  // the checkout: sources only
  put(checkout / "pyproject.toml", "[project]\nname = \"pkg\"\n");
  put(checkout / "src" / "pkg" / "__init__.py", "from ._core import *\n");
  put(checkout / "src" / "pkg" / "cli.py", "def main(): ...\n");
  put(checkout / "src" / "pkg" / "__pycache__" / "cli.cpython-312.pyc", "checkout's own cache\n");

  // the first build
  put(build / "lib" / "pkg" / "_core.cpython-312-x86_64-linux-gnu.so", "ELF v1");
  put(build / "lib" / "pkg" / "__init__.py", "from ._core import *\n");  // copied with its mtime, as setuptools does
  put(build / "lib" / "pkg" / "__pycache__" / "__init__.cpython-312.pyc", "bytecode\n");
  put(build / "lib" / "pkg" / "compat.pyc", "stray bytecode\n");
  put(build / "include" / "pkg" / "core.h", "int core(void);\n");
  put(build / "include" / "pkg" / "version.h", "#define PKG_VERSION 1\n");
  put(build / "include" / "pkg" / "detail" / "old.h", "/* removed in the next build */\n");
  put(build / "gen" / "_version.py", "version = '1.0'\n");
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path root = work_root(argc, argv);
  if (root.empty()) return 1;
  const fs::path build = root / "build", checkout = root / "checkout";
  make_trees(checkout, build);

  step_result r = copy_back(build, checkout);
  show("first build, copy-back:", r);
  expect(r.errors == 0, "no errors");
  expect(has(r, "new     src/pkg/_core.cpython-312-x86_64-linux-gnu.so"), "the extension module was copied");
  expect(!has(r, "new     src/pkg/__init__.py") && !has(r, "updated src/pkg/__init__.py"),
         "__init__.py, identical in the checkout, was not rewritten");
  expect(has(r, "new     include/pkg/detail/old.h") && has(r, "new     src/pkg/_gen/_version.py"),
         "headers and generated modules were copied");
  expect(!fs::exists(checkout / "src" / "pkg" / "compat.pyc") &&
             !fs::exists(checkout / "src" / "pkg" / "__pycache__" / "__init__.cpython-312.pyc"),
         "no *.pyc and no __pycache__/ content was copied");
  expect(fs::exists(checkout / "src" / "pkg" / "cli.py") &&
             fs::exists(checkout / "src" / "pkg" / "__pycache__" / "cli.cpython-312.pyc"),
         "the checkout's own sources and caches are untouched");

  // an incremental rebuild: one header changed, one removed, the extension relinked
  put(build / "include" / "pkg" / "version.h", "#define PKG_VERSION 2\n", rebuild);
  fs::remove_all(build / "include" / "pkg" / "detail");
  put(build / "lib" / "pkg" / "_core.cpython-312-x86_64-linux-gnu.so", "ELF v2, relinked", rebuild);
  r = copy_back(build, checkout);
  show("incremental rebuild, copy-back:", r);
  expect(r.lines.size() == 3, "three changes: the extension, version.h, and old.h deleted");
  expect(has(r, "updated src/pkg/_core.cpython-312-x86_64-linux-gnu.so") && has(r, "updated include/pkg/version.h") &&
             has(r, "deleted include/pkg/detail/old.h"),
         "updated the extension and version.h, deleted the stale header");

  // a no-op rebuild
  const auto before = fs::last_write_time(checkout / "include" / "pkg" / "core.h");
  r = copy_back(build, checkout);
  show("no-op rebuild, copy-back:", r);
  expect(r.unchanged && r.lines.empty(), "nothing written");
  expect(fs::last_write_time(checkout / "include" / "pkg" / "core.h") == before, "mtimes kept: no spurious rebuild");

  fs::remove_all(root);
  if (failures) {
    std::printf("copy_back: %d expectation(s) failed\n", failures);
    return 1;
  }
  std::printf("copy_back: all expectations met\n");
  return 0;
}
