// treesync - mirror SRC into DST with the treesync library.
//
//   treesync [--dry-run] [--jobs N] [--exclude PATTERN]... SRC DST
//
// Prints one line per action (escaped, so odd file names cannot forge output) and a summary.
// Exit status: 0 success, 1 usage error, 2 refused before starting, 23 some entries failed,
// 24 some source entries vanished during the run.
#include <treesync/treesync.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: treesync [--dry-run] [--jobs N] [--exclude PATTERN]... SRC DST\n"
               "Mirror the directory tree SRC into DST: copy what is new or changed (size or mtime),\n"
               "delete what SRC no longer has, follow symlinks in SRC.\n"
               "  -n, --dry-run          show what would be done, change nothing\n"
               "      --exclude PATTERN  skip entries matching PATTERN (rsync/gitignore glob; repeatable)\n"
               "  -j, --jobs N           N parallel workers (default 1; 0 = one per CPU)\n"
               "  -h, --help             this help\n"
               "      --version          print the version\n");
}

const char* label(treesync::action_kind k) {
  switch (k) {
    case treesync::action_kind::create: return "create ";
    case treesync::action_kind::update: return "update ";
    case treesync::action_kind::update_meta: return "meta   ";
    case treesync::action_kind::remove: return "delete ";
    case treesync::action_kind::skip: return "skip   ";
    case treesync::action_kind::error: return "error  ";
    case treesync::action_kind::vanished: return "vanished";
  }
  return "?";
}

template <class... Policies>
treesync::report run(const std::string& src, const std::string& dst, std::error_code& ec, Policies&&... policies) {
  auto print = [](const treesync::action& a) {
    std::string path = a.path.empty() ? std::string(".") : treesync::escape(a.path);
    if (a.type == treesync::file_type::directory) path += '/';
    if (a.kind == treesync::action_kind::error || a.kind == treesync::action_kind::vanished)
      return;  // reported on stderr after the run
    std::printf("%s %s\n", label(a.kind), path.c_str());
  };
  return treesync::sync(src, dst, std::forward<Policies>(policies)..., print, ec);
}

}  // namespace

int main(int argc, char** argv) {
  bool dry = false;
  unsigned jobs = 1;
  std::vector<std::string> excludes;
  std::vector<std::string> operands;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-n" || a == "--dry-run") {
      dry = true;
    } else if ((a == "-j" || a == "--jobs") && i + 1 < argc) {
      jobs = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
    } else if (a.rfind("--jobs=", 0) == 0) {
      jobs = static_cast<unsigned>(std::strtoul(a.c_str() + 7, nullptr, 10));
    } else if (a == "--exclude" && i + 1 < argc) {
      excludes.emplace_back(argv[++i]);
    } else if (a.rfind("--exclude=", 0) == 0) {
      excludes.push_back(a.substr(10));
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("treesync %s\n", TREESYNC_VERSION_STRING);
      return 0;
    } else if (a == "--") {
      for (++i; i < argc; ++i) operands.emplace_back(argv[i]);
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "treesync: unknown option %s\n", treesync::escape(a).c_str());
      usage(stderr);
      return 1;
    } else {
      operands.push_back(a);
    }
  }
  if (operands.size() != 2) {
    usage(stderr);
    return 1;
  }

  std::error_code ec;
  const treesync::exclude patterns(excludes);
  const treesync::jobs workers{jobs};
  const treesync::report r = dry ? run(operands[0], operands[1], ec, patterns, workers, treesync::dry_run)
                                 : run(operands[0], operands[1], ec, patterns, workers);
  if (ec) {
    std::fprintf(stderr, "treesync: refused: %s -> %s: %s\n", treesync::escape(operands[0]).c_str(),
                 treesync::escape(operands[1]).c_str(), ec.message().c_str());
    return 2;
  }
  for (const auto& e : r.errors)
    std::fprintf(stderr, "treesync: %s %s: %s\n", e.operation.c_str(), treesync::escape(e.path).c_str(),
                 e.code.message().c_str());
  for (const auto& e : r.vanished)
    std::fprintf(stderr, "treesync: vanished %s: %s\n", treesync::escape(e.path).c_str(), e.code.message().c_str());

  std::printf("%s%zu scanned, %zu created, %zu updated, %zu metadata, %zu deleted, %zu excluded, %zu skipped, "
              "%zu errors; %llu bytes copied in %.3f s\n",
              dry ? "(dry run) " : "", r.scanned, r.created, r.updated, r.meta_updated, r.deleted, r.excluded,
              r.skipped, r.errors.size(), static_cast<unsigned long long>(r.bytes_copied),
              std::chrono::duration<double>(r.elapsed).count());
  if (!r.errors.empty()) return 23;
  if (!r.vanished.empty()) return 24;
  return 0;
}
