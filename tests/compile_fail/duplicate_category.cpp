// Must not compile: two policies of the same category (compare) in one call.
// Expected diagnostic (tests/CMakeLists.txt): "more than one .*compare".
#include <treesync/treesync.hpp>

int main() { treesync::sync("a", "b", treesync::compare::size_only, treesync::compare::checksum); }
