// examples/cli/run_atomic.cpp - the runs of the treesync tool that write with
// treesync::write::atomic (run.hpp says why the runs are spread over three files).
#include "run.hpp"

namespace treesync_cli {

treesync::report run_atomic(run_context& c, std::error_code& ec) {
  const options& o = c.opt;
  const bool on[] = {o.allow_empty_source, o.hard_links, o.owner, o.group, o.one_file_system, o.specials, o.fsync};
  return run_with<treesync::write::atomic_t, treesync::allow_empty_source_t, treesync::hard_links_t,
                  treesync::preserve_owner_t, treesync::preserve_group_t, treesync::one_file_system_t,
                  treesync::specials_t, treesync::durable_t>(c, ec, treesync::write::atomic, on);
}

}  // namespace treesync_cli
