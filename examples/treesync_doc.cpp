// treesync_doc - writes the treesync tool's man page and bash completion from its --help text
// (examples/cli/options.hpp: help_text()), so the three never disagree.  Run at build time:
//
//   treesync_doc --man [NAME]               roff for man(1) on stdout (NAME: treesync or treesync_mpi)
//   treesync_doc --bash-completion [NAME]   a bash completion script on stdout
//
// How the help text is read: the first line is the synopsis, the paragraph after it the
// description; a line ending in ':' at column 0 opens an option section, whose lines "  -x, --long=ARG
// text" are options (deeper-indented lines continue the text); any other paragraph is prose, and
// one that starts with "Title: " or "Title (...):" becomes a section of that title.  Lines indented
// inside prose (tables, examples) are kept as they are (no filling).
#include "cli/options.hpp"

#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::size_t indent_of(const std::string& s) {
  const std::size_t n = s.find_first_not_of(' ');
  return n == std::string::npos ? s.size() : n;
}

/// Text for roff: backslashes and hyphens escaped, a leading '.' or '\'' protected.
std::string roff(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return {};
  const std::size_t b = s.find_last_not_of(' ');
  return s.substr(a, b - a + 1);
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// One option line: "  -a, --archive             text" -> ("-a, --archive", "text"); the split is
/// the first run of two or more spaces after the option names.
bool split_option(const std::string& line, std::string& names, std::string& text) {
  if (indent_of(line) < 2 || indent_of(line) > 6 || line[indent_of(line)] != '-') return false;
  const std::size_t start = indent_of(line);
  std::size_t gap = line.find("  ", start);
  if (gap == std::string::npos) {
    names = line.substr(start);
    text.clear();
    return true;
  }
  names = line.substr(start, gap - start);
  text = trim(line.substr(gap));
  return true;
}

struct doc {
  std::string synopsis;                 // after "usage: NAME "
  std::vector<std::string> description;
  struct option {
    std::string names, text;
  };
  struct section {
    std::string title;
    bool options = false;
    std::vector<option> opts;
    std::vector<std::vector<std::string>> paragraphs;  // prose: lines as written
  };
  std::vector<section> sections;
};

doc parse_help(const std::string& help, const std::string& name) {
  doc d;
  const auto lines = lines_of(help);
  std::size_t i = 0;
  const std::string usage = "usage: " + name + " ";
  if (i < lines.size() && starts_with(lines[i], usage.c_str())) d.synopsis = lines[i++].substr(usage.size());
  while (i < lines.size() && !lines[i].empty()) d.description.push_back(lines[i++]);
  while (i < lines.size()) {
    while (i < lines.size() && lines[i].empty()) ++i;
    if (i >= lines.size()) break;
    std::vector<std::string> para;
    while (i < lines.size() && !lines[i].empty()) para.push_back(lines[i++]);
    const std::string& first = para[0];
    std::string names, text;
    if (first.back() == ':' && indent_of(first) == 0 && para.size() > 1 && split_option(para[1], names, text)) {
      doc::section s;
      s.title = first.substr(0, first.size() - 1);
      s.options = true;
      for (std::size_t k = 1; k < para.size(); ++k) {
        if (split_option(para[k], names, text)) s.opts.push_back({names, text});
        else if (!s.opts.empty()) s.opts.back().text += (s.opts.back().text.empty() ? "" : " ") + trim(para[k]);
      }
      d.sections.push_back(s);
      continue;
    }
    // prose: "Title: text", "Title (note): text" or "Title ...:" alone on its line
    doc::section s;
    const std::size_t colon = first.find(": ");
    const bool titled_line = first.back() == ':' && first.size() < 100;
    if (indent_of(first) == 0 && (titled_line || (colon != std::string::npos && colon < 40))) {
      s.title = titled_line ? first.substr(0, first.size() - 1) : first.substr(0, colon);
      if (!titled_line) para[0] = first.substr(colon + 2);
      else para.erase(para.begin());
    } else {
      s.title = "Notes";
    }
    s.paragraphs.push_back(para);
    d.sections.push_back(s);
  }
  return d;
}

std::string section_title(const std::string& t) {
  // "What is printed (errors always go to stderr ...)" -> "WHAT IS PRINTED"; the rest goes in the text
  const std::size_t paren = t.find(" (");
  const std::string head = paren == std::string::npos ? t : t.substr(0, paren);
  // "-i codes" -> "-i CODES": an option keeps its spelling
  const std::size_t space = head.find(' ');
  if (head[0] == '-' && space != std::string::npos) return head.substr(0, space) + upper(head.substr(space));
  return upper(head);
}

void man(const doc& d, const std::string& name) {
  std::printf(".\\\" Generated by treesync_doc from `%s --help` (examples/cli/options.hpp); do not edit.\n",
              name.c_str());
  std::printf(".TH %s 1 \"\" \"treesync %s\" \"User Commands\"\n", upper(name).c_str(), TREESYNC_VERSION_STRING);
  std::printf(".SH NAME\n%s \\- copy a directory tree incrementally, with rsync's options\n", roff(name).c_str());
  std::printf(".SH SYNOPSIS\n.B %s\n%s\n", roff(name).c_str(), roff(d.synopsis).c_str());
  std::printf(".SH DESCRIPTION\n");
  for (const auto& l : d.description) std::printf("%s\n", roff(l).c_str());
  bool options_header = false;
  for (const auto& s : d.sections) {
    if (s.options) {
      if (!options_header) std::printf(".SH OPTIONS\n");
      options_header = true;
      std::printf(".SS %s\n", roff(s.title).c_str());
      for (const auto& o : s.opts) std::printf(".TP\n.B %s\n%s\n", roff(o.names).c_str(), roff(o.text).c_str());
      continue;
    }
    const std::size_t paren = s.title.find(" (");
    std::printf(".SH %s\n", roff(section_title(s.title)).c_str());
    if (paren != std::string::npos) std::printf("%s:\n", roff(s.title.substr(paren + 1)).c_str());
    for (const auto& para : s.paragraphs) {
      std::printf(".PP\n");
      bool nofill = false;
      for (const auto& l : para) {
        const bool literal = indent_of(l) >= 2;
        if (literal && !nofill) std::printf(".nf\n");
        if (!literal && nofill) std::printf(".fi\n");
        nofill = literal;
        std::printf("%s\n", roff(l).c_str());
      }
      if (nofill) std::printf(".fi\n");
    }
  }
  std::printf(".SH SEE ALSO\n.BR rsync (1)\n");
}

void bash_completion(const doc& d, const std::string& name) {
  std::set<std::string> words, file_args, dir_args;
  std::vector<std::pair<std::string, std::string>> choices = {
      {"--verify", "full dirs none"}, {"--progress", "auto always never"}, {"--info", "progress2"}};
  for (const auto& s : d.sections)
    for (const auto& o : s.opts) {
      std::istringstream in(o.names);
      for (std::string w; std::getline(in, w, ',');) {
        w = trim(w);
        std::string arg;
        const std::size_t cut = w.find_first_of("=[ ");
        if (cut != std::string::npos) {
          arg = w.substr(cut);
          w = w.substr(0, cut);
        }
        if (w.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 2) != std::string::npos && w.size() > 2) continue;  // --no-OPTION
        words.insert(arg.empty() || arg[0] != '=' ? w : w + "=");
        if (arg.find("FILE") != std::string::npos) file_args.insert(w);
        if (arg.find("DIR") != std::string::npos) dir_args.insert(w);
      }
    }
  const auto join = [](const std::set<std::string>& s) {
    std::string out;
    for (const auto& w : s) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  std::string fn = "_" + name;
  std::printf("# bash completion for %s. Generated by treesync_doc from `%s --help`; do not edit.\n", name.c_str(),
              name.c_str());
  std::printf("%s() {\n", fn.c_str());
  std::printf("  local cur prev opt val\n  cur=${COMP_WORDS[COMP_CWORD]}\n  prev=${COMP_WORDS[COMP_CWORD-1]}\n");
  std::printf("  if [[ $cur == --*=* ]]; then\n    opt=${cur%%%%=*}; val=${cur#*=}\n    case $opt in\n");
  for (const auto& c : choices) std::printf("      %s) COMPREPLY=($(compgen -W '%s' -- \"$val\")); return ;;\n", c.first.c_str(), c.second.c_str());
  if (!file_args.empty()) {
    std::string pat;
    for (const auto& f : file_args) pat += (pat.empty() ? "" : "|") + f;
    std::printf("      %s) COMPREPLY=($(compgen -f -- \"$val\")); return ;;\n", pat.c_str());
  }
  if (!dir_args.empty()) {
    std::string pat;
    for (const auto& f : dir_args) pat += (pat.empty() ? "" : "|") + f;
    std::printf("      %s) COMPREPLY=($(compgen -d -- \"$val\")); return ;;\n", pat.c_str());
  }
  std::printf("    esac\n    COMPREPLY=(); return\n  fi\n");
  std::printf("  if [[ $cur == -* ]]; then\n    COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n", join(words).c_str());
  std::printf("    if [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == *= ]]; then compopt -o nospace 2>/dev/null; fi\n");
  std::printf("    return 0\n  fi\n");
  std::printf("  COMPREPLY=($(compgen -d -- \"$cur\"))\n  compopt -o filenames 2>/dev/null\n  return 0\n}\n");
  std::printf("complete -F %s %s\n", fn.c_str(), name.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string name = argc > 2 ? argv[2] : "treesync";
  if (mode != "--man" && mode != "--bash-completion") {
    std::fprintf(stderr, "usage: treesync_doc --man|--bash-completion [NAME]\n");
    return 1;
  }
  const treesync_cli::tool_info tool;
  std::string help = tool.help();
  if (name != tool.name) {  // treesync_mpi: the same options, its own name in the synopsis
    const std::string from = std::string("usage: ") + tool.name + " ";
    if (help.rfind(from, 0) == 0) help = "usage: " + name + " " + help.substr(from.size());
  }
  const doc d = parse_help(help, name);
  if (d.synopsis.empty() || d.sections.empty()) {
    std::fprintf(stderr, "treesync_doc: the help text no longer starts with 'usage: %s ...'\n", name.c_str());
    return 1;
  }
  if (mode == "--man") man(d, name);
  else bash_completion(d, name);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
