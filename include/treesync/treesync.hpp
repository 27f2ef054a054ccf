// treesync.hpp - header-only incremental directory-tree mirror (C++17)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A missing destination is populated in one streaming pass; an existing one is
// brought up to date by comparing size and mtime, rewriting only what changed and
// deleting what the source no longer has.  A second run on an unchanged tree
// performs no writes at all.
//
// This is the one header a user includes.  It includes the parts below, in order; vendoring
// treesync means copying the directory include/treesync/ as it is.
//   core.hpp             file_type, stat_info, action, report, error codes, file_pair
//   policies.hpp         compare, deletion, links, write, errors, the flags, treesync::options
//   detail/glob.hpp      the pattern matchers (glob's, rsync's wildmatch)
//   detail/rule_files.hpp    filter's rule files read (the one reader, no link followed)
//   detail/filter_syntax.hpp filter's rules: rsync's syntax parsed, a rule matched
//   detail/filter_rules.hpp  filter's machinery: the rules, their budget, rule files parsed, contexts
//   filter.hpp           exclusion: glob, exclude, filter (rsync rules), predicate combinators
//   detail/dst_rules.hpp DST's per-directory rule files read up front (-F / dir-merge with --delete)
//   filesystem.hpp       the filesystem contract (what a backend must do), capability flags
//   traits.hpp           how a policy is recognised; the policy pack
//   detail/manifest.hpp  the state file (state_file): records, their text, what a run trusts
//   detail/state.hpp     what a run shares, a directory pair in flight, a plan, the journal
//   detail/apply.hpp     the applier (every write, one install path) and the pruner
//   detail/walk.hpp      the walker (lists, merges, decides)
//   detail/engine.hpp    the worker, the scheduler, one run
//   detail/posix_io.hpp  the POSIX backend's toolkit: descriptor guards, stat conversion, data copy
//   detail/posix_roots.hpp  the POSIX backend's roots pinned to descriptors
//   posix_fs.hpp         the POSIX backend (handle based, *at() calls)
//   std_fs.hpp           the portable backend (std::filesystem only)
//   sync.hpp             sync(...): policies and options folded, the run
// mock_fs.hpp (an in-memory filesystem with fault injection, for tests) is included on demand,
// beside this header: it holds the filesystem alone (each part includes only what it uses).
//
// How a run works: walk -> decide -> apply.
//   - Each directory pair is listed on both sides, sorted by name and merged: a name only in the
//     source is created, one only in the destination is deleted (as the deletion policy says),
//     one on both sides is compared.  Directory pairs are independent: with jobs{n} they are
//     spread over n threads, depth first, and each directory's metadata is set post-order, once
//     its content is complete.
//   - The walker decides what each entry needs (a plan) and never writes; the applier carries the
//     plan out, and a dry run has the recording applier (the same operations, each recording
//     what it would do, none writing), chosen once per run.  Every new entry is made under a temporary
//     name (or inside a directory still being populated under its own temporary name) and put
//     in place by one rename: a reader never sees a partial file at a final path.
//   - Every operation below the roots goes through directory handles without following links the
//     run did not ask to follow: a symlink planted in the destination is replaced, never
//     written through.
// The state file (state_file{path}, detail/manifest.hpp): a record of what a run left in the
// destination, removed before the run's first write and written after a run that was not
// stopped, so it never claims more than is true.  verify::dirs takes a directory's entries from
// it where the directory's stamps are those recorded; verify::none reads nothing it vouches for.
// The source is always walked; only destination reads are replaced.
// The contract: after a run that reports no error, the destination equals what the policies
// define from the source (content, type, mode, mtime, and owner/xattrs when asked); an entry
// that failed is reported in report::errors and left as it was, never half-written.
// The racy-mtime rule: a file copied within the racy window of its source's mtime (1 s by
// default) may have changed again within the same timestamp tick, so size+mtime cannot vouch
// for it.  Where the destination keeps a ctime, the next run sees that the copy was taken
// within the window and compares content once; where it does not (network filesystems with
// whole-second mtimes, ctime == mtime), the copy is given a "smudged" mtime a second or two
// early, so the next run sees it differ (or, under a compare window, sees it racy) and settles
// it by content or a fresh copy.  Once the window has passed, a verified copy gets the exact
// mtime and is trusted from then on (see file_pair in policies.hpp).
#ifndef TREESYNC_TREESYNC_HPP
#define TREESYNC_TREESYNC_HPP

#define TREESYNC_VERSION_MAJOR 0
#define TREESYNC_VERSION_MINOR 1
#define TREESYNC_VERSION_PATCH 0
#define TREESYNC_VERSION (TREESYNC_VERSION_MAJOR * 10000 + TREESYNC_VERSION_MINOR * 100 + TREESYNC_VERSION_PATCH)
#define TREESYNC_VERSION_STRING "0.1.0"

#include "detail/config.hpp"
#include "core.hpp"
#include "policies.hpp"
#include "detail/glob.hpp"
#include "detail/filter_rules.hpp"
#include "filter.hpp"
#include "detail/dst_rules.hpp"
#include "filesystem.hpp"
#include "traits.hpp"
#include "detail/manifest.hpp"
#include "detail/state.hpp"
#include "detail/apply.hpp"
#include "detail/walk.hpp"
#include "detail/engine.hpp"
#include "detail/posix_io.hpp"
#include "detail/posix_roots.hpp"
#include "posix_fs.hpp"
#include "trusted_path.hpp"
#include "std_fs.hpp"
#include "sync.hpp"

#endif  // TREESYNC_TREESYNC_HPP
