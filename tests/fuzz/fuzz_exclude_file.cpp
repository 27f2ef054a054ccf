// libFuzzer target: exclude-file parsing.  The input is the text of an exclude file (rsync
// --exclude-from rules) followed, after a NUL byte, by newline-separated paths to query; each path
// is queried as a file, a directory and a symlink.  treesync::exclude::from_lines and
// exclude::excluded must never crash, hang or trip a sanitizer.  Build: tests/fuzz/run.sh.
#include <treesync/treesync.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

// BUG (see tests/test_hostile.cpp, "a glob with many stars matches a long path in bounded time"):
// the matcher backtracks over every '*' / '**' (the depth cap bounds recursion, not work): a
// 25-byte pattern such as "**?**?**?**?**?**?**?**?x" takes ~30 s against one 60-byte path.
// Until it is fixed, inputs with more than 4 stars are skipped so that CI's bounded run stays
// meaningful; build with -DTREESYNC_FUZZ_ALL_PATTERNS (TREESYNC_FUZZ_ALL=1 tests/fuzz/run.sh) to
// fuzz them too.
inline bool too_many_stars(std::string_view s) {
#if defined(TREESYNC_FUZZ_ALL_PATTERNS)
  (void)s;
  return false;
#else
  std::size_t n = 0;
  for (char c : s) n += c == '*';
  return n > 4;
#endif
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = in.find('\0');
  const std::string_view text = in.substr(0, cut);
  std::string_view queries = cut == std::string_view::npos ? std::string_view("a\nb/c\n.x/y.pyc") : in.substr(cut + 1);
  if (too_many_stars(text)) return 0;
  const treesync::exclude ex = treesync::exclude::from_lines(text);
  volatile bool sink = ex.size() > 0;
  while (!queries.empty()) {
    const std::size_t nl = queries.find('\n');
    const std::string_view q = queries.substr(0, nl);
    for (auto t : {treesync::file_type::regular, treesync::file_type::directory, treesync::file_type::symlink})
      sink = sink ^ ex.excluded(q, t);
    if (nl == std::string_view::npos) break;
    queries.remove_prefix(nl + 1);
  }
  (void)sink;
  return 0;
}
