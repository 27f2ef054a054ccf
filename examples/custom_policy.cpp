// custom_policy - your own policies, composed with treesync's built-ins.
//
//   custom_policy [SCRATCH_DIR]
//
// Three user-defined policies, each a plain type with no base class:
//   * a comparison: small files are compared by content, large ones by size and mtime;
//   * an exclusion predicate (a lambda): editor backups ("name~") and "*.swp" files, combined with
//     a built-in glob list through treesync::any_of;
//   * an observer that tallies actions and records one line per change;
// passed together with built-ins (links::preserve, max_delete, jobs) in any order.
//
// It builds a small tree under SCRATCH_DIR (default: a new directory in $TMPDIR or /tmp), syncs it,
// edits a small file without changing its size or mtime (what size+mtime would miss), syncs again,
// prints what happened, checks it, and removes the scratch directory.  Exit status 0 when every
// expectation held.
#include <treesync/treesync.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

// ---- 1. a comparison policy: `bool up_to_date(const treesync::file_pair&) const` -------------------
// Small files are cheap to read, so compare their bytes; trust size+mtime for the large ones.
struct content_if_small {
  std::uint64_t threshold = 64 * 1024;

  bool up_to_date(const treesync::file_pair& f) const {
    if (f.src.size != f.dst.size) return false;
    if (f.src.size <= threshold) return f.same_content();
    return treesync::compare::size_mtime{}.up_to_date(f);  // delegate to a built-in
  }
};
static_assert(treesync::is_compare_policy_v<content_if_small>, "content_if_small is a compare policy");

// ---- 3. an observer: any callable `void(const treesync::action&)` ------------------------------------
// The engine calls it one action at a time (under a lock), so it needs no synchronisation itself.
struct tally {
  std::map<std::string, int> per_kind;
  std::vector<std::string> lines;

  void operator()(const treesync::action& a) {
    ++per_kind[treesync::to_string(a.kind)];
    if (a.kind == treesync::action_kind::skip) return;
    std::string line = std::string(treesync::to_string(a.kind)) + " " + treesync::to_string(a.type) + " " +
                       (a.path.empty() ? std::string(".") : treesync::escape(a.path));
    lines.push_back(line);
  }
  void print(const char* title) {
    std::sort(lines.begin(), lines.end());  // the order of actions depends on the workers
    std::printf("%s\n", title);
    for (const auto& l : lines) std::printf("  %s\n", l.c_str());
    lines.clear();
  }
};

static void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

static std::string get(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

static int failures = 0;
static void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "  ok  " : "  FAIL", what);
  if (!ok) ++failures;
}

// The example's directory: argv[1] (emptied), or a new one under $TMPDIR; empty on failure.
static fs::path work_root(int argc, char** argv) {
  fs::path root;
  if (argc > 1) {
    root = argv[1];
    fs::remove_all(root);
    fs::create_directories(root);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/treesync-custom-policy.XXXXXX";
    if (!::mkdtemp(templ.data())) return std::perror("mkdtemp"), fs::path();
    root = templ;
  }
  return root;
}

// The source tree: files to keep, editor junk and an object directory to exclude, a symlink.
static void make_source(const fs::path& src) {
  put(src / "config.ini", "threads=4\n");
  put(src / "notes.txt", "remember the milk\n");
  put(src / "notes.txt~", "editor backup\n");
  put(src / "docs" / ".guide.md.swp", "vim swap file\n");
  put(src / "docs" / "guide.md", "# Guide\n");
  put(src / "obj" / "main.o", "object file\n");
  put(src / "big.bin", std::string(100 * 1024, 'x'));
  fs::create_symlink("notes.txt", src / "latest");
  // Sources written an hour ago: a file copied within a second of its source's mtime is "racily
  // clean" and gets its mtime re-stamped by the next run, which would blur what this example shows.
  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& e : fs::recursive_directory_iterator(src))
    if (!e.is_symlink()) fs::last_write_time(e.path(), an_hour_ago);
}

int main(int argc, char** argv) {
  const fs::path root = work_root(argc, argv);
  if (root.empty()) return 1;
  const fs::path src = root / "src", dst = root / "dst";
  make_source(src);

  // ---- 2. an exclusion predicate: any callable `bool(std::string_view rel, treesync::file_type)` ----
  auto editor_junk = [](std::string_view rel, treesync::file_type t) {
    if (t != treesync::file_type::regular) return false;
    const auto slash = rel.rfind('/');
    const std::string_view name = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    const bool backup = !name.empty() && name.back() == '~';
    const bool swap = name.size() > 4 && name.substr(name.size() - 4) == ".swp";
    return backup || swap;
  };
  // ...combined with a built-in glob list: excluded when either excludes it
  const auto excluded = treesync::any_of(editor_junk, treesync::exclude{"obj/"});

  tally observer;
  auto sync = [&] {
    // policies in any order: user-defined and built-in alike
    return treesync::sync(src, dst, observer, content_if_small{}, excluded, treesync::links::preserve,
                          treesync::max_delete{10}, treesync::jobs{2});
  };

  treesync::report r = sync();
  observer.print("first run:");
  std::printf("  -> %zu created, %zu excluded\n", r.created, r.excluded);
  expect(r.created == 7, "7 entries created: the root, config.ini, notes.txt, docs/, docs/guide.md, big.bin, latest");
  expect(r.excluded == 3, "3 excluded: notes.txt~, docs/.guide.md.swp, obj/");
  expect(!fs::exists(dst / "notes.txt~") && !fs::exists(dst / "docs" / ".guide.md.swp"),
         "the lambda excluded the editor backup and the swap file");
  expect(!fs::exists(dst / "obj"), "the built-in glob excluded obj/");
  expect(fs::is_symlink(dst / "latest"), "links::preserve kept the symlink");

  // Same size, same mtime, different bytes: size+mtime alone would call it current.
  const auto mtime = fs::last_write_time(src / "config.ini");
  put(src / "config.ini", "threads=8\n");
  fs::last_write_time(src / "config.ini", mtime);
  fs::last_write_time(dst / "config.ini", mtime);
  r = sync();
  observer.print("second run, after a same-size edit of config.ini:");
  expect(r.updated == 1 && get(dst / "config.ini") == "threads=8\n", "content_if_small saw the edit");
  expect(r.created + r.deleted == 0, "nothing else changed");

  r = sync();
  observer.print("third run:");
  expect(r.unchanged(), "a third run changes nothing");

  std::printf("actions seen:");
  for (const auto& [kind, n] : observer.per_kind) std::printf(" %s=%d", kind.c_str(), n);
  std::printf("\n");

  fs::remove_all(root);
  if (failures) {
    std::printf("custom_policy: %d expectation(s) failed\n", failures);
    return 1;
  }
  std::printf("custom_policy: all expectations met\n");
  return 0;
}
