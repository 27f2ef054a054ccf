// examples/cli/run_dry.cpp - the dry runs of the treesync tool (run.hpp says why the runs are
// spread over three files).  Nothing is written, so neither the write policy nor durable is passed.
#include "run.hpp"

namespace treesync_cli {

treesync::report run_dry(run_context& c, std::error_code& ec) {
  const options& o = c.opt;
  const bool on[] = {o.allow_empty_source, o.hard_links, o.owner, o.group, o.one_file_system, o.specials};
  return run_with<treesync::dry_run_t, treesync::allow_empty_source_t, treesync::hard_links_t,
                  treesync::preserve_owner_t, treesync::preserve_group_t, treesync::one_file_system_t,
                  treesync::specials_t>(c, ec, treesync::dry_run, on);
}

}  // namespace treesync_cli
