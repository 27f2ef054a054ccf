#!/usr/bin/python3
"""tests/bench/state_bomb.py - a crafted but valid state file, for measuring what one costs a run.

Takes a true state file (one a run with --state=FILE just wrote, so its identity and its record of
the destination root are right) and adds COUNT entries to the root's record: short sibling names,
no stat, none of which exists in the destination.  Under --verify=none the next run takes the
root's listing from the record, so each of them is an entry the source lacks.

  treesync --delete --state=S SRC/ DST                 # a true state file
  tests/bench/state_bomb.py S --size=64M               # its root now lists ~4.47 M more names
  /usr/bin/time -v treesync --delete --state=S --verify=none SRC/ DST

--size=BYTES (K, M, G suffixes: powers of 1024) picks COUNT so that the file is about that big;
--count=N gives it directly.  The names are `~` followed by digits: they sort after every name a
small test tree holds, so the record stays sorted as the format asks.
"""
import argparse
import re
import sys


def size_arg(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError("a size is digits with an optional K, M or G")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("state", help="a state file a run wrote (rewritten in place)")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--size", type=size_arg, help="the file's size to reach, about")
    group.add_argument("--count", type=int, help="how many names to add")
    args = ap.parse_args()

    with open(args.state, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    root = next((i for i, l in enumerate(lines) if l.startswith(b"D 0 / ")), None)
    if root is None:
        sys.exit("state_bomb: no listed root record (D 0 /) in " + args.state)
    end = root + 1
    while end < len(lines) and lines[end].startswith(b"E "):
        end += 1
    if any(l[2:3] >= b"~" for l in lines[root + 1:end]):
        sys.exit("state_bomb: the root already holds a name from '~' on; use a tree without one")

    width = 7
    line_size = len(b"E ~ 1 -\n") + width
    count = args.count if args.count is not None else max(0, (args.size - sum(len(l) + 1 for l in lines)) // line_size)
    if count >= 10 ** width:
        sys.exit("state_bomb: at most %d names" % (10 ** width - 1))

    fields = lines[root].split(b" ")
    fields[4] = str(int(fields[4]) + count).encode()
    with open(args.state, "wb") as out:
        out.write(b"\n".join(lines[:root] + [b" ".join(fields)] + lines[root + 1:end]) + b"\n")
        chunk = []
        for k in range(count):
            chunk.append(b"E ~%0*d 1 -\n" % (width, k))
            if len(chunk) == 65536:
                out.write(b"".join(chunk))
                chunk = []
        out.write(b"".join(chunk))
        rest = lines[end:]
        if rest:
            out.write(b"\n".join(rest) + b"\n")
    print("state_bomb: %s: %d names added to the root's record" % (args.state, count))


if __name__ == "__main__":
    main()
