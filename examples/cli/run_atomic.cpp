// examples/cli/run_atomic.cpp - the treesync tool's runs with treesync::write::atomic and
// a compare policy that does not re-stamp (size+mtime, -u).
// run.hpp says why the runs are spread over five files.
#include "run.hpp"

namespace treesync_cli {

treesync::report run_atomic(run_context& c, std::error_code& ec) {
  return run_writing<false, treesync::write::atomic_t>(c, ec);
}

}  // namespace treesync_cli
