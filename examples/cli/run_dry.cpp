// examples/cli/run_dry.cpp - the dry runs of the treesync tool (run.hpp says why the runs are
// spread over five files).  Nothing is written, so neither the write policy nor durable is passed.
#include "run.hpp"

namespace treesync_cli {

namespace {
template <bool Restamp>
treesync::report dry(run_context& c, std::error_code& ec) {
  const options& o = c.opt;
  const bool on[] = {o.allow_empty_source, o.hard_links, o.owner, o.group, o.one_file_system, o.specials};
  return run_with<Restamp, treesync::dry_run_t, treesync::allow_empty_source_t, treesync::hard_links_t,
                  treesync::preserve_owner_t, treesync::preserve_group_t, treesync::one_file_system_t,
                  treesync::specials_t>(c, ec, treesync::dry_run, on);
}
}  // namespace

treesync::report run_dry(run_context& c, std::error_code& ec) {
  return restamps(c.opt) ? dry<true>(c, ec) : dry<false>(c, ec);
}

}  // namespace treesync_cli
