// Must not compile: an argument that is not a policy of any category.
// Expected diagnostic (tests/CMakeLists.txt): "is not a treesync policy".
#include <treesync/treesync.hpp>

int main() { treesync::sync("a", "b", 42); }
