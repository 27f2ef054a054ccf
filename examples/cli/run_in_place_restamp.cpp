// examples/cli/run_in_place_restamp.cpp - the treesync tool's runs with treesync::write::in_place and
// a compare policy that re-stamps (-c, --size-only).
// run.hpp says why the runs are spread over five files.
#include "run.hpp"

namespace treesync_cli {

treesync::report run_in_place_restamp(run_context& c, std::error_code& ec) {
  return run_writing<true, treesync::write::in_place_t>(c, ec);
}

}  // namespace treesync_cli
