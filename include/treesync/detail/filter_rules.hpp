// treesync/detail/filter_rules.hpp - treesync::filter's machinery: the rules, their budget, the
// rule files parsed, the directory contexts
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of filter.hpp (treesync::filter is its public face); include <treesync/treesync.hpp>.
#ifndef TREESYNC_DETAIL_FILTER_RULES_HPP
#define TREESYNC_DETAIL_FILTER_RULES_HPP

#include "../core.hpp"
#include "filter_syntax.hpp"
#include "glob.hpp"
#include "rule_files.hpp"

#include <iterator>
#include <map>
#include <stdexcept>

namespace treesync {
inline namespace v0 {

namespace detail {

// [treesync.detail.filter] ----------------------------------------------------------------------
//
// What treesync::filter (filter.hpp, the documentation of the semantics) is made of: its rules
// (their syntax and matching: filter_syntax.hpp), the rule files read for the per-directory
// merges (rule_files.hpp), parsed into the rule budget, and the per-thread chains of directory
// contexts.  filter derives from it privately and adds the API.
class filter_rules : protected rule_file_reader, protected rule_matcher {
 protected:
  /// See filter::loader.
  using loader = std::function<std::string(std::string_view dir, std::string_view name)>;
  static constexpr int max_merges_per_file = 1024;  // `merge` lines read for one rule file, nested or not
  // A rule parsed from a rule file counts once in the budget, and once more for each further
  // `pattern_unit` bytes of its pattern: what the budget counts bounds what the rules hold, the
  // patterns' text included (a merged file's text counts each time it is parsed).
  static constexpr std::size_t pattern_unit = 64;

  filter_rules() : shared_(std::make_shared<shared_state>()) {}
  explicit filter_rules(loader load) : filter_rules() { shared_->load = std::move(load); }
  // A copy has the rules and the loader, and contexts of its own.
  filter_rules(const filter_rules& o)
      : rules_(o.rules_), has_merge_(o.has_merge_), shared_(std::make_shared<shared_state>()) {
    shared_->load = o.shared_->load;
    shared_->budget = o.shared_->budget;
    shared_->past = o.shared_->past;
  }
  filter_rules& operator=(const filter_rules& o) {
    if (this != &o) {
      filter_rules copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  filter_rules(filter_rules&&) noexcept = default;
  filter_rules& operator=(filter_rules&&) noexcept = default;
  ~filter_rules() = default;

  // The budget of parsed rules (filter::max_rules): shared by every context and thread of the
  // filters that share it (filter::share_rule_budget), counting the rules the contexts hold now.
  struct budget_state {
    std::atomic<std::size_t> held{0};
    std::atomic<std::size_t> overflows{0};  // rule files not parsed for want of budget
    std::size_t limit = 1000000;
  };
  enum class past_budget { refuse, keep_all };
  struct over_budget {};

  // One rule file as read for one directory: its rules (single-instance merges read in place).
  struct rule_file {
    std::vector<rule> rules;
    bool cleared = false;  // held a '!': the rules of the directories above do not apply
    std::shared_ptr<budget_state> budget;  // what `charged` is counted in
    std::size_t charged = 0;               // the rules parsed into it, counted against `budget`
    rule_file() = default;
    rule_file(const rule_file&) = delete;
    rule_file& operator=(const rule_file&) = delete;
    ~rule_file() { release(); }
    void release() {
      if (budget && charged) budget->held.fetch_sub(charged);
      charged = 0;
    }
  };
  // The rules of one dir-merge name in force in a directory: its own file, then the inherited.
  struct layer {
    std::shared_ptr<const rule_file> file;
    std::shared_ptr<const layer> up;
    std::size_t base = 0;  // the length of "DIR/" (0 at the root): anchored patterns start there
  };
  // One active dir-merge name: the rule that started it (kept alive by `owner`, the rule file
  // holding it, or the filter itself), what applies in this directory, what its subdirectories
  // inherit.
  struct slot {
    const rule* merge = nullptr;
    std::shared_ptr<const rule_file> owner;
    std::shared_ptr<const layer> current;
    std::shared_ptr<const layer> inherit;
  };
  // The rules in force in one directory.  Shared by every thread in that directory: a thread
  // that enters a subdirectory another thread is in (or holds in its chain) takes its context
  // from `children` instead of reading the directory's files again; a context lives while some
  // thread's chain holds it (the weak entries of those gone are swept as the list grows).
  // Its lock is one of shared_state::locks (ctx_lock()): a context costs a few words per
  // directory of a deep chain, no mutex of its own.
  struct dir_ctx {
    std::shared_ptr<const std::vector<slot>> slots;  // the parent's own when they are the same (build)
    // under ctx_lock(*this): the subdirectories some thread holds (few: the weak entries of those
    // gone are swept as the list grows), held while a child's context is built (one read per directory)
    mutable std::vector<std::pair<std::string, std::weak_ptr<const dir_ctx>>> children;
    mutable std::size_t sweep_at = 16;
    const slot* find(const rule* r) const {
      for (const slot& s : *slots)
        if (s.merge == r) return &s;
      return nullptr;
    }
  };

  // A thread's position: the contexts from the root down to the directory `dir`.
  struct cursor {
    std::string dir;
    std::vector<std::pair<std::size_t, std::shared_ptr<const dir_ctx>>> stack;  // (length of the prefix, context)

    const dir_ctx* enter(const filter_rules& f, std::string_view pd) {
      if (!stack.empty() && pd.size() == dir.size() && pd == std::string_view(dir)) return stack.back().second.get();
      if (stack.empty()) {
        dir.clear();
        stack.emplace_back(0, f.root_ctx());
      }
      const std::size_t n = std::min(dir.size(), pd.size());
      std::size_t common = 0;
      if (std::string_view(dir).substr(0, n) == pd.substr(0, n))  // one level down or up: one memcmp
        common = n;
      else
        while (common < n && dir[common] == pd[common]) ++common;
      while (stack.size() > 1) {
        const std::size_t e = stack.back().first;
        if (e <= common && (e == pd.size() || pd[e] == '/')) break;
        stack.pop_back();
      }
      dir.resize(stack.back().first);
      std::size_t pos = stack.back().first;
      while (pos < pd.size()) {
        const std::size_t start = pos == 0 ? 0 : pos + 1;
        std::size_t next = pd.find('/', start);
        if (next == std::string_view::npos) next = pd.size();
        auto ctx = f.child_ctx(*stack.back().second, pd.substr(start, next - start), pd.substr(0, next), next + 1);
        stack.emplace_back(next, std::move(ctx));
        dir.append(pd.data() + pos, next - pos);
        pos = next;
      }
      return stack.back().second.get();
    }
  };

  struct shared_state {
    loader load;
    std::shared_ptr<budget_state> budget = std::make_shared<budget_state>();
    past_budget past = past_budget::refuse;
    std::mutex mu;
    std::mutex locks[32];  // the contexts' locks, by address (ctx_lock)
    std::vector<std::pair<std::thread::id, std::shared_ptr<cursor>>> cursors;
    std::shared_ptr<const dir_ctx> root;  // the root's context, shared by every thread's chain
  };

  // After any change to rules_: the contexts built so far point into the old rules.
  void changed() {
    has_merge_ = std::any_of(rules_.begin(), rules_.end(), [](const rule& r) { return r.merge; });
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->cursors.clear();
    shared_->root.reset();
  }

  // The lock of the context `c` (its children, the building of one).
  std::mutex& ctx_lock(const dir_ctx& c) const {
    return shared_->locks[(reinterpret_cast<std::uintptr_t>(&c) / alignof(dir_ctx)) % std::size(shared_->locks)];
  }

  // The root directory's context, built once (its files read when the first thread asks).
  std::shared_ptr<const dir_ctx> root_ctx() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!shared_->root) shared_->root = build(nullptr, std::string_view(), 0);
    return shared_->root;
  }

  // The context of `parent`'s subdirectory `name` (`dir` its path, `base` = dir.size() + 1): the
  // one a thread already holds, or built now, under parent's lock so that threads entering the
  // directory together read its files once.
  std::shared_ptr<const dir_ctx> child_ctx(const dir_ctx& parent, std::string_view name, std::string_view dir,
                                           std::size_t base) const {
    std::lock_guard<std::mutex> lock(ctx_lock(parent));
    auto& kids = parent.children;
    const auto it = std::find_if(kids.begin(), kids.end(), [&](const auto& k) { return k.first == name; });
    if (it != kids.end())
      if (auto live = it->second.lock()) return live;
    std::shared_ptr<const dir_ctx> ctx = build(&parent, dir, base);
    if (it != kids.end()) {
      it->second = ctx;
    } else {
      if (kids.size() >= parent.sweep_at) {  // drop the entries of directories every thread has left
        kids.erase(std::remove_if(kids.begin(), kids.end(), [](const auto& k) { return k.second.expired(); }),
                   kids.end());
        parent.sweep_at = std::max<std::size_t>(16, 2 * kids.size());
      }
      kids.emplace_back(std::string(name), ctx);
    }
    return ctx;
  }

  void push(rule r) {
    rules_.push_back(std::move(r));
    changed();
  }

  std::shared_ptr<cursor> thread_cursor() const {
    const auto me = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (auto& c : shared_->cursors)
      if (c.first == me) return c.second;
    if (shared_->cursors.size() >= 256) shared_->cursors.clear();  // threads of runs gone by
    shared_->cursors.emplace_back(me, std::make_shared<cursor>());
    return shared_->cursors.back().second;
  }

  void add(bool include_it, std::string_view pat, bool negate = false) {
    if (pat.empty()) return;
    rules_.push_back(make_rule(include_it, pat, negate));
    changed();  // a context's slots point into rules_
  }

  // The text of the rule file `name` of `dir` parsed as the merge modifiers `mods` say, into
  // `out`; `merges` counts the single-instance merges read so far (at most max_merges_per_file:
  // rsync has no such bound, this one keeps what a rule file someone else wrote can cost in file
  // reads to that per directory), `depth` the files in the chain of merges down to this one (1: a
  // per-directory rule file; at most merge_depth_error::max_merge_depth, rsync's MAX_MERGE_DEPTH).
  // `merged_at`: the file is the target of a `merge` line, named so ("FILE line N") in errors.
  // An error never quotes a line's text (rsync's habit too): a rule file may merge any file the
  // run can read, and the message would copy that file's first bad line into someone's log.
  //
  // Each rule parsed is counted in the filter's budget (over_budget past it: build() decides), once
  // per `merge` line and once per rule kept, plus once per further pattern_unit bytes of its
  // pattern: a file merged N times counts N times, its text included; the texts being parsed at
  // once (a file and the files it merges) are bounded by 2 * max_file_size.
  void parse_file(std::string_view dir, std::string_view name, unsigned mods, rule_file& out, int& merges,
                  const std::string& merged_at = std::string(), std::size_t held_text = 0, int depth = 1) const {
    const std::string text = shared_->load ? shared_->load(dir, name) : std::string();
    if (text.empty()) return;  // no rules (and no copy of a deep directory's path)
    held_text += text.size();
    if (held_text > 2 * max_file_size) throw over_budget{};
    file_parse parse{*this, dir, name, mods, out, merges, held_text, depth, std::string(dir), 0};
    if (!parse.where.empty()) parse.where += '/';
    parse.where += name;
    if (!merged_at.empty()) parse.where = "the file merged at " + merged_at + ", its";
    parse.lines(text);
  }

  // The parse of one rule file's text (parse_file's steps): the file, the line being read, and
  // what its rules go into.  Its steps are defined after filter_rules.
  struct file_parse {
    const filter_rules& self;  // its loader, for the files a `merge` line reads
    std::string_view dir;      // the rule file's directory, "" at the root
    std::string_view name;     // its name there
    unsigned mods;             // the merge modifiers it is parsed with
    rule_file& out;            // the rules parsed, counted in out.budget
    int& merges;               // the single-instance merges read so far for the top file
    std::size_t held_text;     // the texts being parsed at once, this one's included
    int depth;                 // the files in the chain of merges down to this one (1: the top)
    std::string where;         // the file as its errors name it
    std::size_t lineno;        // the line being parsed (1: the first)

    /// Counts a rule with a pattern of `pattern_size` bytes in the budget (over_budget past it).
    void charge(std::size_t pattern_size);
    /// Charges the rule `r` and appends it to the file's rules.
    void keep(rule r);
    /// Parses `text` line by line: each line one rule, or with mod_words the words of each.
    void lines(std::string_view text);
    /// Parses the line `line` as words split on whitespace, a lone prefix joined with the next word.
    void words(std::string_view line);
    /// Parses one rule (a line or a word): a pattern as the file's mods say, or rsync's rule syntax.
    void one(std::string_view token);
    /// A `merge` / `.` rule: checked and counted, then the file it names is parsed in place.
    void merge(const parsed& p);
    /// Throws the "Unknown filter rule" error of the line being parsed (its text not quoted).
    [[noreturn]] void bad() const;
  };

  // The context of the directory `dir` (length+1 = `base`; the root: "" and 0) below `parent`.
  std::shared_ptr<const dir_ctx> build(const dir_ctx* parent, std::string_view dir, std::size_t base) const {
    std::vector<slot> slots = first_slots(parent);
    for (std::size_t i = 0; i < slots.size(); ++i) read_slot(slots, i, dir, base);  // it may add slots
    return share_slots(parent, std::move(slots));
  }

  // Whether one of `slots` is for the dir-merge name `name` (a duplicate name is not active: rsync).
  static bool active(const std::vector<slot>& slots, std::string_view name) {
    for (const slot& s : slots)
      if (s.merge->pattern == name) return true;
    return false;
  }

  // The slots a directory starts with: its parent's (what they inherit, nothing current yet), or
  // at the root those of the filter's own dir-merge rules.
  std::vector<slot> first_slots(const dir_ctx* parent) const {
    std::vector<slot> slots;
    if (parent) {
      slots.reserve(parent->slots->size());
      for (const slot& s : *parent->slots) slots.push_back(slot{s.merge, s.owner, nullptr, s.inherit});
    } else {
      for (const rule& r : rules_)
        if (r.merge && !active(slots, r.pattern)) slots.push_back(slot{&r, nullptr, nullptr, nullptr});
    }
    return slots;
  }

  // The rule file of the dir-merge rule `m` in the directory `dir`, parsed.  Past the budget: the
  // filter_error, or (past_budget::keep_all) a file that excludes everything here and below.
  std::shared_ptr<rule_file> read_merge_file(std::string_view dir, const rule& m) const {
    auto file = std::make_shared<rule_file>();
    file->budget = shared_->budget;
    int merges = 0;
    try {
      parse_file(dir, m.pattern, m.mods, *file, merges);
    } catch (const over_budget&) {
      shared_->budget->overflows.fetch_add(1);
      file->release();
      std::vector<rule>().swap(file->rules);  // its memory given back, not only its count
      if (shared_->past == past_budget::refuse)
        throw filter_error("the rule files in force hold more than " + std::to_string(shared_->budget->limit) +
                           " rules, or merge more than " + std::to_string((2 * max_file_size) >> 20) +
                           " MiB at once (the filter's rule budget), at " + std::string(dir) + (dir.empty() ? "" : "/") +
                           m.pattern);
      file->rules.push_back(make_rule(false, "*"));  // keep everything here and below
      file->cleared = false;
    }
    return file;
  }

  // Reads the file of `slots[i]` in the directory `dir`: its layer (or, when it changes nothing,
  // the inherited one) becomes what applies here, its dir-merge rules new slots; then what the
  // subdirectories inherit.
  void read_slot(std::vector<slot>& slots, std::size_t i, std::string_view dir, std::size_t base) const {
    const rule* m = slots[i].merge;
    std::shared_ptr<rule_file> file = read_merge_file(dir, *m);
    if (file->rules.empty() && !file->cleared) {
      slots[i].current = slots[i].inherit;
    } else {
      for (const rule& r : file->rules)  // dir-merge rules of the file start here
        if (r.merge && !active(slots, r.pattern)) slots.push_back(slot{&r, file, nullptr, nullptr});
      auto l = std::make_shared<layer>();
      l->file = file;
      if (!file->cleared) l->up = slots[i].inherit;
      l->base = base;
      slots[i].current = std::move(l);
    }
    slots[i].inherit = (m->mods & mod_no_inherit) ? nullptr : slots[i].current;
  }

  // The context holding `slots`: a directory that changes nothing (no rule file of its own below
  // an inherited one) shares its parent's slots, so that a chain of such directories costs a
  // context each, not a context and slots.
  static std::shared_ptr<const dir_ctx> share_slots(const dir_ctx* parent, std::vector<slot> slots) {
    auto made = std::make_shared<dir_ctx>();
    const auto same = [](const slot& a, const slot& b) {
      return a.merge == b.merge && a.owner == b.owner && a.current == b.current && a.inherit == b.inherit;
    };
    if (parent && std::equal(slots.begin(), slots.end(), parent->slots->begin(), parent->slots->end(), same))
      made->slots = parent->slots;
    else
      made->slots = std::make_shared<const std::vector<slot>>(std::move(slots));
    return made;
  }

  // 1 included, 0 excluded, -1 no rule matched.
  int decide(const std::vector<rule>& rules, std::string_view rel, file_type type, const dir_ctx* ctx,
             std::size_t base, int depth) const {
    for (const rule& r : rules) {
      if (r.merge) {
        const slot* s = ctx && depth < 64 ? ctx->find(&r) : nullptr;  // a duplicate name: not active (rsync)
        if (!s) continue;
        for (const layer* l = s->current.get(); l; l = l->up.get()) {
          const int v = decide(l->file->rules, rel, type, ctx, l->base, depth + 1);
          if (v >= 0) return v;
        }
        continue;
      }
      if (matches(r, rel, type, base) != r.negate) return r.include ? 1 : 0;
    }
    return -1;
  }

  std::vector<rule> rules_;
  bool has_merge_ = false;
  std::shared_ptr<shared_state> shared_;
};

// [treesync.detail.filter.parse] ------------------------------------------------------------------
//
// filter_rules::file_parse's steps (parse_file).

inline void filter_rules::file_parse::charge(std::size_t pattern_size) {
  budget_state& budget = *out.budget;
  const std::size_t n = 1 + pattern_size / pattern_unit;
  if (budget.held.fetch_add(n) + n > budget.limit) {
    budget.held.fetch_sub(n);
    throw over_budget{};
  }
  out.charged += n;
}

inline void filter_rules::file_parse::keep(rule r) {
  charge(r.pattern.size());
  out.rules.push_back(std::move(r));
}

inline void filter_rules::file_parse::lines(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (mods & mod_words) {
      words(line);
    } else if (!line.empty() && line.front() != '#' && line.front() != ';') {
      one(line);
    }
  }
}

inline void filter_rules::file_parse::words(std::string_view line) {
  std::size_t i = 0;
  const auto word = [&](std::size_t& k) {
    while (k < line.size() && std::isspace(static_cast<unsigned char>(line[k]))) ++k;
    const std::size_t b = k;
    while (k < line.size() && !std::isspace(static_cast<unsigned char>(line[k]))) ++k;
    return line.substr(b, k - b);
  };
  for (std::string_view w = word(i); !w.empty(); w = word(i)) {
    const bool prefix_only = !(mods & (mod_exclude | mod_include)) &&
                             (w == "+" || w == "-" || w == "." || w == ":" || w == "include" || w == "exclude" ||
                              w == "merge" || w == "dir-merge");
    if (prefix_only) {  // "- foo + bar": two rules
      const std::string_view next = word(i);
      if (!next.empty()) w = line.substr(static_cast<std::size_t>(w.data() - line.data()),
                                         static_cast<std::size_t>(next.data() + next.size() - w.data()));
    }
    one(w);
  }
}

inline void filter_rules::file_parse::one(std::string_view token) {
  if (mods & (mod_exclude | mod_include)) {
    if (token == "!" && (mods & mod_cvs)) {
      out.rules.clear();
      out.cleared = true;
      return;
    }
    keep(make_rule((mods & mod_include) != 0, token));
    return;
  }
  parsed p;
  if (!parse_rule(token, p)) bad();
  switch (p.kind) {
    case kind_clear:
      out.rules.clear();  // their count stays charged, as their capacity stays held
      out.cleared = true;
      break;
    case kind_include:
    case kind_exclude:
      if (p.arg.empty()) break;
      keep(make_rule(p.kind == kind_include, p.arg, (p.mods & mod_negate) != 0));
      break;
    case kind_dir_merge:
      check_merge_name(p.arg, where, lineno);
      if (p.mods & mod_self) keep(make_rule(false, basename(p.arg)));
      keep(merge_rule(p.arg, p.mods));
      break;
    case kind_merge:
      merge(p);
      break;
  }
}

inline void filter_rules::file_parse::merge(const parsed& p) {
  check_merge_name(p.arg, where, lineno);
  if (depth >= merge_depth_error::max_merge_depth)  // a merge file that merges itself comes here
    throw merge_depth_error("merge-file include depth limit (" + std::to_string(merge_depth_error::max_merge_depth) +
                            ") exceeded at <rule from " + where + " line " + std::to_string(lineno) + ">");
  if (++merges > max_merges_per_file)
    throw filter_error("more than " + std::to_string(max_merges_per_file) + " merge files read for one rule file (" +
                       where + " line " + std::to_string(lineno) + ")");
  charge(0);  // the line itself: a file merged N times is parsed, and counted, N times
  if (p.mods & mod_self) keep(make_rule(false, basename(p.arg)));
  self.parse_file(dir, p.arg, p.mods, out, merges,
                  std::string(dir).append(dir.empty() ? "" : "/").append(name) + " line " + std::to_string(lineno),
                  held_text, depth + 1);
}

inline void filter_rules::file_parse::bad() const {
  throw filter_error("Unknown filter rule: <rule from " + where + " line " + std::to_string(lineno) + ">");
}

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_FILTER_RULES_HPP
