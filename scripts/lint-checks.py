#!/usr/bin/env python3
"""Fails on FileCheck directives FileCheck would silently ignore.

FileCheck only recognizes exact spellings (CHECK:, CHECK-NEXT:, ...); a
misspelled one (CHeCK:, CHECK-LABLE:, CHECK-NEXT :) makes a test pass while
checking nothing. It also flags CHECK lines that hard-code SSA numbers.
"""
import os
import re
import sys

SUFFIXES = {"", "-NEXT", "-SAME", "-NOT", "-DAG", "-LABEL", "-EMPTY", "-COUNT"}
PREFIXES = {"CHECK", "RUN", "COM", "REQUIRES", "UNSUPPORTED", "XFAIL"}
# Anything that looks like a directive: a word ending in CHECK/RUN-ish text
# followed by optional spaces and a colon.
candidate = re.compile(r"(?://|#|;)\s*([A-Za-z][A-Za-z0-9_-]*(?:\s+[A-Za-z-]+)?)(\s*):")
ssa = re.compile(r"CHECK[A-Z-]*:.*%[0-9]+\b")


def check_file(path, prefixes):
    errors = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            for m in candidate.finditer(line):
                word = m.group(1)
                upper = word.upper()
                if not any(k in upper.replace(" ", "") for k in ("CHECK", "CHEK", "CHCK")):
                    continue
                ok = False
                for p in prefixes:
                    for s in SUFFIXES:
                        if word == p + s or re.fullmatch(re.escape(p + s) + r"(\{[0-9]+\})?", word):
                            ok = True
                    if word.startswith(p + "-COUNT-"):
                        ok = True
                if not ok or m.group(2):
                    errors.append(f"{path}:{lineno}: suspicious directive '{word}{m.group(2)}:'")
            if ssa.search(line):
                errors.append(f"{path}:{lineno}: CHECK line hard-codes an SSA number; capture it")
    return errors


def main():
    root = sys.argv[1]
    errors = []
    count = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith((".mlir", ".onnxtext", ".test")):
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8", errors="replace").read()
            prefixes = {"CHECK"}
            for m in re.finditer(r"--check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)", text):
                prefixes.update(m.group(1).split(","))
            count += 1
            errors += check_file(path, prefixes)
    for e in errors:
        print(e)
    print(f"lint-checks: {count} files, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
