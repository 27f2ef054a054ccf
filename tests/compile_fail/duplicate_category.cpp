// Must not compile: two policies of the same category (compare) in one call.
// The expected diagnostic is registered in tests/CMakeLists.txt.
#include <treesync/treesync.hpp>

int main() { treesync::sync("a", "b", treesync::compare::size_only, treesync::compare::checksum); }
