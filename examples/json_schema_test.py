#!/usr/bin/env python3
"""ctest treesync.example.cli.json_schema: the README's --json schema table pins the CLI's output.

    json_schema_test.py --cli build/examples/treesync --readme README.md --work DIR

Reads the table between <!-- json-schema --> and <!-- /json-schema --> (key, type, example), runs
the CLI with --json on real trees (a mirror with -i and a symlink, an error, a skipped FIFO, a
deletion, a refusal, a usage error, a non-UTF-8 name) and checks every object: each key present has
the listed type, each key listed without '?' is present (a usage error: only its own keys), no key
is missing from the table, and each example parses as JSON of its type.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

TYPES = {"int": int, "float": (int, float), "str": str, "bool": bool, "null": type(None), "object": dict,
         "list": list}
USAGE_KEYS = {"schema", "version", "status", "exit_code", "message"}


def read_schema(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"<!-- json-schema -->\n(.*?)<!-- /json-schema -->", text, re.S)
    if not m:
        sys.exit("FAIL: no <!-- json-schema --> table in %s" % readme)
    schema = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        key, typ, example = cells[0].strip("`"), cells[1], cells[2]
        optional = typ.endswith("?")
        kinds = typ.rstrip("?").split("/")
        for k in kinds:
            if k not in TYPES:
                sys.exit("FAIL: README schema: unknown type %r for %s" % (k, key))
        schema[key] = (tuple(TYPES[k] for k in kinds), optional)
        ex = example.strip("`")
        if ex not in ("{...}", "[ENTRY]", "[ACTION]"):
            value = json.loads(ex)
            if not isinstance(value, schema[key][0]) or (isinstance(value, bool) and bool not in schema[key][0]):
                sys.exit("FAIL: README schema: the example of %s, %s, is not a %s" % (key, ex, typ))
    return schema


def check(obj, schema, what, seen):
    problems = []

    def is_type(v, types):
        if isinstance(v, bool) and bool not in types:
            return False
        return isinstance(v, types)

    def walk(o, prefix, required_prefix):
        for k, v in o.items():
            key = prefix + k
            seen.add(key)
            if key not in schema:
                problems.append("%s: key %s is not in the README's table" % (what, key))
                continue
            if not is_type(v, schema[key][0]):
                problems.append("%s: %s = %r is not %s" % (what, key, v, schema[key][0]))
            if isinstance(v, dict):
                walk(v, key + ".", key + ".")
            if isinstance(v, list) and k in ("errors", "vanished", "skipped", "notices", "actions"):
                for item in v:
                    walk(item, "ACTION." if k == "actions" else "ENTRY.", None)
        # required keys of this level
        for key, (_, optional) in schema.items():
            if optional:
                continue
            if prefix == "" and "." not in key:
                if o.get("status") == "usage" and key not in USAGE_KEYS:
                    continue
                if key not in o:
                    problems.append("%s: required key %s is missing" % (what, key))
            elif prefix and key.startswith(prefix) and "." not in key[len(prefix):]:
                if key[len(prefix):] not in o:
                    problems.append("%s: required key %s is missing" % (what, key))

    walk(obj, "", "")
    if obj.get("status") == "usage" and set(obj) != USAGE_KEYS:
        problems.append("%s: a usage error has keys %s" % (what, sorted(obj)))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--readme", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    schema = read_schema(a.readme)
    w = os.path.abspath(a.work)
    shutil.rmtree(w, ignore_errors=True)
    s = os.path.join(w, "src")
    os.makedirs(os.path.join(s, "sub"))
    for name, data in (("a.txt", b"alpha"), ("sub/b.h", b"beta")):
        with open(os.path.join(s, name), "wb") as f:
            f.write(data)
    with open(os.path.join(os.fsencode(s), b"caf\xe9"), "wb") as f:
        f.write(b"latin-1")
    os.symlink("a.txt", os.path.join(s, "link"))
    os.symlink("nowhere", os.path.join(s, "dangling"))
    os.mkfifo(os.path.join(s, "fifo"))
    d = os.path.join(w, "dst")
    runs = [
        ("mirror -i -l", ["-i", "-l", "--delete", s + "/", d]),
        ("warm -v", ["-v", "--delete", s + "/", d]),
        ("delete with -i", None),
        ("refused (max-delete)", ["--delete", "--max-delete=0", os.path.join(s, "sub") + "/", d]),
        ("dry-run max-delete", ["-n", "-i", "--delete", "--max-delete=0", os.path.join(s, "sub") + "/", d]),
        ("missing source", [os.path.join(w, "missing") + "/", d]),
        ("usage error", ["--bogus"]),
        ("non-UTF-8 operand", ["-i", s + "/", os.fsencode(os.path.join(w, "dst")) + b"\xff"]),
        ("SRC without slash", ["-i", s, os.path.join(w, "named")]),
    ]
    seen, problems = set(), []
    for what, args in runs:
        if args is None:
            os.makedirs(os.path.join(d, "extra"), exist_ok=True)
            args = ["-i", "--delete", s + "/", d]
        p = subprocess.run([a.cli, "--json"] + args, capture_output=True)
        out = p.stdout.decode("utf-8")
        lines = out.splitlines()
        if len(lines) != 1:
            problems.append("%s: expected one line on stdout, got %r" % (what, out))
            continue
        obj = json.loads(lines[0])
        if obj.get("exit_code") != p.returncode:
            problems.append("%s: exit_code %r but the exit status is %d" % (what, obj.get("exit_code"), p.returncode))
        problems += check(obj, schema, what, seen)
        print("%-22s exit %3d  status %-10s keys %d" % (what, p.returncode, obj.get("status"), len(obj)))
    # the table lists nothing the runs could not show, except keys of cases not run here
    not_shown = sorted(k for k in schema if k not in seen)
    print("keys of the table not shown by these runs: %s" % (", ".join(not_shown) or "none"))
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print("json_schema: %d keys in the README's table; every --json object matched it" % len(schema))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
