// tests/test_cli_options.cpp - issue 46: the CLI's options are one table (examples/cli/options.hpp,
// cli_options(), beside the library's treesync::switch_table); parse() reads every spelling from it.
#include <doctest/doctest.h>

#include "../examples/cli/options.hpp"
#include "../examples/cli/refusal.hpp"

#include <cerrno>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using treesync_cli::cli_options;
using treesync_cli::takes;

// each spelling of a row ("c,checksum", "max-size=SIZE", "progress[=WHEN]", "delete;del"),
// without its value's name; none for the library's place and for help-only rows
std::vector<std::string> spellings(const char* text, bool listed_only = false) {
  std::vector<std::string> out;
  std::string_view cli = text ? text : "";
  if (listed_only) cli = cli.substr(0, std::min(cli.find(';'), cli.size()));
  while (!cli.empty()) {
    const std::size_t comma = std::min(cli.find_first_of(",;"), cli.size());
    const std::string_view one = cli.substr(0, comma);
    out.emplace_back(one.substr(0, std::min(one.find_first_of("=["), one.size())));
    cli.remove_prefix(std::min(comma + 1, cli.size()));
  }
  return out;
}
std::vector<std::string> spellings(const treesync_cli::cli_option& row) {
  return row.on ? spellings(row.cli) : std::vector<std::string>{};
}

std::string dashed(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }

treesync_cli::parse_result parse(std::vector<std::string> args, const treesync_cli::tool_info& tool = {}) {
  args.insert(args.begin(), "treesync");
  args.push_back("src/");
  args.push_back("dst");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return treesync_cli::parse(static_cast<int>(args.size()), argv.data(), tool);
}

bool unknown(const treesync_cli::parse_result& r) {
  return r.exit_now && r.exit_code == 1 && r.message.find("unknown option") != std::string::npos;
}

}  // namespace

TEST_CASE("cli options: no spelling names two options, the tool's rows and the library's switches together") {
  std::set<std::string> seen;
  for (const auto& row : treesync::switch_table)
    for (const auto& s : spellings(row.cli)) CHECK_MESSAGE(seen.insert(s).second, s);
  for (const auto& row : cli_options())
    for (const auto& s : spellings(row)) CHECK_MESSAGE(seen.insert(s).second, s);
  CHECK(seen.size() > 60);
}

TEST_CASE("cli options: every spelling of every row is accepted, and parse() knows no other") {
  for (const auto& row : cli_options())
    for (const auto& s : spellings(row)) {
      if (s == "help" || s == "version" || s == "A" || s == "acls") continue;  // exit or refuse by design
      std::vector<std::string> args{dashed(s)};
      if (row.arg == takes::value) args.push_back(s == "verify" ? "full" : s == "info" ? "progress2" : "1");
      if (s == "verify") args.insert(args.begin(), "--state=st");
      const auto r = parse(args);
      CHECK_MESSAGE(!r.exit_now, (s + ": " + r.message));
    }
  CHECK(unknown(parse({"--no-such-option"})));
  CHECK(unknown(parse({"-Z"})));
}

TEST_CASE("cli options: --no-NAME turns off each spelling of a row that has an off, and is unknown for a row without") {
  for (const auto& row : cli_options())
    for (const auto& s : spellings(row)) {
      const auto r = parse({"--no-" + s});
      if (treesync_cli::find_option("no-" + s).row && !treesync_cli::find_option("no-" + s).negated) continue;  // --no-delete: a row
      if (!row.off) {
        CHECK_MESSAGE(unknown(r), s);
      } else if (s == "r" || s == "recursive" || s == "t" || s == "times") {
        CHECK_MESSAGE(r.message.find("always recurses") != std::string::npos, s);
      } else {
        CHECK_MESSAGE(!r.exit_now, (s + ": " + r.message));
      }
    }
  // the last of a switch and its --no- form wins
  CHECK(parse({"-i", "--no-i"}).opt.itemize == false);
  CHECK(parse({"--no-itemize-changes", "-i"}).opt.itemize == true);
  CHECK(parse({"-c", "--no-checksum"}).opt.compare == treesync::compare::kind::size_mtime);
  CHECK(parse({"-l", "--no-links"}).opt.links == treesync::links::kind::skip);
  CHECK(parse({"--delete", "--no-delete"}).opt.deletion == treesync::deletion::kind::keep);
}

TEST_CASE("cli options: --safe-links keeps safe links under -l or -a only, and -L or --copy-unsafe-links win") {
  using treesync::links::kind;
  CHECK(parse({"-l", "--safe-links"}).opt.links == kind::preserve_safe);
  CHECK(parse({"--safe-links", "-a"}).opt.links == kind::preserve_safe);
  CHECK(parse({"--safe-links"}).opt.links == kind::skip);  // without -l: rsync skips every link
  CHECK(parse({"-l", "--safe-links", "--no-links"}).opt.links == kind::skip);
  CHECK(parse({"-l", "--safe-links", "--no-safe-links"}).opt.links == kind::preserve);
  CHECK(parse({"-l", "--safe-links", "--copy-unsafe-links"}).opt.links == kind::dereference_unsafe);
  CHECK(parse({"-a", "--safe-links", "-L"}).opt.links == kind::dereference);
}

TEST_CASE("cli options: an option that takes no value refuses --NAME=VALUE, and one that takes a value needs it") {
  for (const auto& row : cli_options())
    for (const auto& s : spellings(row)) {
      if (s.size() == 1) continue;
      if (row.arg == takes::nothing) {
        const auto r = parse({"--" + s + "=x"});
        CHECK_MESSAGE(r.message.find("takes no value") != std::string::npos, (s + ": " + r.message));
      }
    }
  std::vector<std::string> argv_storage{"treesync", "src/", "dst", "--max-delete"};
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  const auto r = treesync_cli::parse(static_cast<int>(argv.size()), argv.data());
  CHECK(r.message.find("needs a value") != std::string::npos);
  CHECK(parse({"--progress=always"}).opt.progress_always);
}

TEST_CASE("cli options: --help lists every row where the table puts it, the library's switches in its place") {
  const std::string help = treesync_cli::help_text();
  std::size_t last = 0;
  for (const auto& row : cli_options()) {
    if (!row.cli) {  // the library's switches, each listed in its order
      for (const auto& lib : treesync::switch_table) {
        if (!*lib.cli) continue;
        const std::size_t at = help.find(treesync_cli::option_help(lib.cli, lib.help));
        REQUIRE_MESSAGE(at != std::string::npos, lib.cli);
        CHECK_MESSAGE(at >= last, lib.cli);
        last = at;
      }
      continue;
    }
    const std::string lines = treesync_cli::option_help(row.cli, row.help);
    const std::size_t at = help.find(lines);
    REQUIRE_MESSAGE(at != std::string::npos, row.cli);
    CHECK_MESSAGE(at >= last, row.cli);
    CHECK(help.compare(at - 1, 1, "\n") == 0);
    last = at;
    // its listed spellings head the entry; hidden ones (after ';') are not listed as heads
    for (const auto& s : spellings(row.cli, true))
      CHECK_MESSAGE(lines.substr(0, 28).find((s.size() == 1 ? "-" : "--") + s) != std::string::npos, s);
  }
  CHECK(help.find("\n      --del ") == std::string::npos);
  CHECK(unknown(parse({"--no-OPTION"})));
}

TEST_CASE("cli options: a row's help keeps its own line breaks, and a help without one wraps at 108 columns") {
  CHECK(treesync_cli::option_help("x,example=N", "one\ntwo") ==
        "  -x, --example=N           one\n                            two\n");
  const std::string words(30, 'w');
  const std::string wrapped = treesync_cli::option_help("long-example", words + " " + words + " " + words);
  CHECK(wrapped == "      --long-example        " + words + " " + words + "\n                            " + words + "\n");
}

TEST_CASE("cli options: a tool refuses every spelling of an option it does not support, named as given") {
  treesync_cli::tool_info tool;
  tool.name = "tool";
  tool.not_supported = {"hard-links", "backup-dir", "progress"};
  tool.not_supported_why = " (why)";
  CHECK(parse({"-H"}, tool).message.rfind("tool: -H: not supported by tool (why)\n", 0) == 0);
  CHECK(parse({"--hard-links"}, tool).message.rfind("tool: --hard-links: not supported by tool (why)\n", 0) == 0);
  CHECK(parse({"-nH"}, tool).message.rfind("tool: -H: not supported", 0) == 0);
  CHECK(parse({"--backup-dir=b"}, tool).exit_code == 1);
  CHECK(parse({"--progress=always"}, tool).exit_code == 1);
  CHECK(!parse({"--no-hard-links", "--no-progress", "-n"}, tool).exit_now);  // turning one off is no use of it
  CHECK(treesync_cli::options_list(tool.not_supported) == "-H, --backup-dir, --progress");
}

TEST_CASE("cli refusal: the library's codes are refusals by rule with rsync's statuses, an errno the system's failure") {
  using treesync::errc;
  using treesync_cli::classify_refusal;
  const auto kind = [](std::error_code ec) { return std::make_pair(classify_refusal(ec).exit_code, classify_refusal(ec).by_rule); };
  CHECK(kind(errc::source_missing) == std::make_pair(23, true));
  CHECK(kind(errc::max_delete_exceeded) == std::make_pair(25, true));
  CHECK(kind(errc::temp_dir_missing) == std::make_pair(1, true));
  for (const errc e : {errc::same_directory, errc::nested_directory, errc::empty_source, errc::unsafe_backup_dir,
                       errc::unsafe_temp_dir, errc::state_dir_missing, errc::state_not_regular,
                       errc::destination_parent_missing, errc::unsupported}) {
    CAPTURE(static_cast<int>(e));
    CHECK(kind(e) == std::make_pair(2, true));  // Python: treesync.Refused
  }
  // the system's failures (Python: treesync.Error), whatever the errno, even one a code compares equal to
  CHECK(kind(std::error_code(EACCES, std::system_category())) == std::make_pair(2, false));
  CHECK(kind(std::make_error_code(std::errc::no_such_file_or_directory)) == std::make_pair(2, false));
}

TEST_CASE("cli options: the options reaching over the whole tree come from the rows, the library's switches included") {
  // what treesync_mpi refuses and lists in its --help: rows marked reach::whole_tree and the
  // library's switches with switch_whole_tree, in --help's order
  CHECK(treesync_cli::options_list(treesync_cli::whole_tree_options()) ==
        "-x, -H, --backup-dir, -T, --state, --verify, --progress, --info");
  treesync_cli::tool_info tool;
  tool.name = "tool";
  tool.not_supported = treesync_cli::whole_tree_options();
  for (const char* arg : {"-x", "--hard-links", "--backup-dir=b", "-T", "--state=f", "--verify=dirs", "--progress",
                          "--info=progress2"}) {
    CAPTURE(arg);
    CHECK(parse({arg, "t"}, tool).message.find("not supported by tool") != std::string::npos);
  }
  CHECK(!parse({"-a", "--delete", "-c"}, tool).exit_now);  // options over the entries stay
}

TEST_CASE("cli options: each of the library's option_rules is a usage error in its words, with the command line's spellings") {
  // the command line that sets an option_rules key away from its default
  const auto args_for = [](std::string_view key) -> std::vector<std::string> {
    if (key == "inplace") return {"--inplace"};
    if (key == "backup_dir") return {"--backup-dir=b"};
    if (key == "state") return {"--state=st"};
    if (key == "hard_links") return {"-H"};
    if (key == "verify") return {"--verify=none"};
    return {};
  };
  for (const auto& rule : treesync::option_rules) {
    CAPTURE(rule.first);
    CAPTURE(rule.second);
    std::vector<std::string> both = args_for(rule.first), second = args_for(rule.second);
    REQUIRE_FALSE(both.empty());
    REQUIRE_FALSE(second.empty());
    if (!rule.needs) both.insert(both.end(), second.begin(), second.end());
    const auto r = parse(both);
    CHECK(r.exit_now);
    CHECK(r.exit_code == 1);
    const std::string text = treesync_cli::rule_text(rule);
    CHECK(r.message == "treesync: " + text + "\nTry 'treesync --help' for more information.\n");
    CHECK(text.find(rule.why) != std::string::npos);
    for (const char* key : {rule.first, rule.second}) {  // each option named as --help names it
      std::string name = key;
      for (char& c : name) c = c == '_' ? '-' : c;
      CHECK(treesync_cli::find_option(name));
    }
    CHECK(std::string(treesync_cli::help_text()).find("  " + text + "\n") != std::string::npos);
    // the first alone (with the second, for a needs row) is no usage error
    std::vector<std::string> alone = args_for(rule.first);
    if (rule.needs) alone.insert(alone.end(), second.begin(), second.end());
    CHECK_FALSE(parse(alone).exit_now);
  }
}

TEST_CASE("cli options: -I is compare::always alone; -c and --size-only win over it, -u keeps it (rsync's order)") {
  using treesync_cli::compare_mode;
  struct expect {
    std::vector<std::string> args;
    compare_mode compare;
    bool ignore_times;
  };
  const expect cases[] = {
      {{"-I"}, compare_mode::always, true},
      {{"--ignore-times"}, compare_mode::always, true},
      {{"-I", "--no-ignore-times"}, compare_mode::size_mtime, false},
      {{"--ignore-times", "--no-I"}, compare_mode::size_mtime, false},
      {{"-I", "-c"}, compare_mode::checksum, false},
      {{"--size-only", "-I"}, compare_mode::size_only, false},
      {{"-u", "-I"}, compare_mode::newer, true},
      {{"-I", "-c", "--no-c"}, compare_mode::always, true},
  };
  for (const auto& c : cases) {
    const auto r = parse(c.args);
    CAPTURE(c.args.front());
    CAPTURE(c.args.back());
    REQUIRE_FALSE(r.exit_now);
    CHECK(r.opt.compare == c.compare);
    CHECK(r.opt.ignore_times == c.ignore_times);
  }
  const auto refused = parse({"-u", "-I", "--size-only"});  // -u with --size-only stays refused
  CHECK((refused.exit_now && refused.exit_code == 1));
}

TEST_CASE("cli options: an empty path for --backup-dir, --temp-dir, -T or --state is a usage error naming the option") {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--backup-dir="}, "--backup-dir: an empty directory name"},
      {{"--temp-dir="}, "--temp-dir: an empty directory name"},
      {{"-T", ""}, "--temp-dir: an empty directory name"},
      {{"--state="}, "--state: an empty file name"},
  };
  for (const auto& c : cases) {
    const std::string& message = c.second;
    CAPTURE(message);
    const auto r = parse(c.first);
    CHECK(r.exit_now);
    CHECK(r.exit_code == 1);
    CHECK(r.message.rfind("treesync: " + message + "\n", 0) == 0);
  }
  const auto given = parse({"--temp-dir=t", "--backup-dir=b"});
  CHECK_FALSE(given.exit_now);
  CHECK(given.opt.lib.temp_dir == "t");
  CHECK(given.opt.backup_dir == std::optional<std::string>("b"));
  CHECK(parse({"--state=st"}).opt.state == std::optional<std::string>("st"));
}
