// libFuzzer target: the state file's parser (issue 23: a state file is input anyone who can write
// it may have written).  The input is a state file's text.  It is parsed whole and, in pieces cut
// where the first byte says, by manifest_reader; the two must agree (the pieces' boundaries never
// matter).  What parses must hold only single-component names, parents before children, sorted
// unique entries; and its text must read back to the same text.  Nothing may crash, throw, hang
// or trip a sanitizer.  Build: tests/fuzz/run.sh.
#include <treesync/treesync.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_shape(const treesync::detail::manifest& m) {
  using treesync::detail::no_record;
  for (std::size_t i = 0; i < m.dirs.size(); ++i) {
    const treesync::detail::dir_record& d = m.dirs[i];
    require(i == 0 ? d.parent == no_record : d.parent < i);
    if (i != 0) require(treesync::detail::is_component(d.name));
    for (std::size_t k = 0; k < d.entries.size(); ++k) {
      const treesync::detail::entry_record& e = d.entries[k];
      require(treesync::detail::is_component(e.name));
      if (k > 0) require(d.entries[k - 1].name < e.name);
      if (e.sub != no_record) require(e.sub > i && e.sub < m.dirs.size() && m.dirs[e.sub].parent == i);
      if (e.has_target) require(e.type == treesync::file_type::symlink);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  treesync::detail::manifest whole;
  treesync::detail::state_defect why;
  const bool ok = whole.parse(text, &why);

  treesync::detail::manifest pieces;
  treesync::detail::manifest_reader reader(pieces);
  const std::size_t step = size == 0 ? 1 : std::size_t(data[0] % 61) + 1;
  bool fed = true;
  for (std::size_t at = 0; fed && at < size; at += step) fed = reader.feed(text.substr(at, step));
  const bool ok2 = fed && reader.finish();
  require(ok == ok2);
  if (!ok) {
    require(whole.dirs.empty() && !why.reason.empty());
    require(reader.defect().line == why.line && reader.defect().reason == why.reason);
    return 0;
  }
  check_shape(whole);
  require(pieces.dirs.size() == whole.dirs.size());
  const std::string once = whole.serialize();
  treesync::detail::manifest again;
  require(again.parse(once));
  check_shape(again);
  require(again.serialize() == once);
  return 0;
}
