#!/usr/bin/env python3
"""Size limits of the workspace's non-test Rust code: no file over MAX_FILE_LINES lines and no
function over MAX_FN_LINES lines. Exits 1 and lists every offender when a limit is broken.

    scripts/check_sizes.py [--report N]

"Non-test code" is every `.rs` file under `crates/*/src/`, up to its first top-level
`#[cfg(test)]` item (the unit-test module beside the code). Files under `tests/`, `benches/` and
`examples/` are tests and examples, not counted. A function starts at a line declaring `fn name`
and ends at the first later line holding only `}` at the declaration's indentation, which is how
rustfmt lays out every function body. `--report N` also prints the N longest files and functions.
"""

import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FN_LINES = 120

FN_START = re.compile(
    r'^(?P<indent>\s*)(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?'
    r'(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+(?P<name>\w+)'
)
TEST_CUT = re.compile(r'^#\[cfg\(test\)\]')


def non_test_lines(path):
    """The file's lines before its first top-level `#[cfg(test)]` item."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if TEST_CUT.match(line):
            return lines[:i]
    return lines


def functions(lines):
    """(name, first line number, length in lines) of every function with a body."""
    found = []
    for i, line in enumerate(lines):
        m = FN_START.match(line)
        if not m:
            continue
        indent = m.group("indent")
        closing = indent + "}"
        # A declaration without a body (trait method, extern item) ends with `;` before any `{`.
        for j in range(i, len(lines)):
            text = lines[j].rstrip()
            if text.endswith(";") and "{" not in "".join(lines[i : j + 1]):
                break
            if "{" in text:
                # One-line bodies (`fn f() { .. }`) close on the same line.
                if text.endswith("}") and text.count("{") == text.count("}"):
                    found.append((m.group("name"), i + 1, j - i + 1))
                    break
                for k in range(j + 1, len(lines)):
                    if lines[k].rstrip() == closing:
                        found.append((m.group("name"), i + 1, k - i + 1))
                        break
                break
    return found


def rust_sources(root):
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        for dirpath, _, names in os.walk(src):
            for name in sorted(names):
                if name.endswith(".rs"):
                    yield os.path.join(dirpath, name)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = 0
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        report = int(sys.argv[2])
    files, fns = [], []
    for path in rust_sources(root):
        rel = os.path.relpath(path, root)
        lines = non_test_lines(path)
        files.append((len(lines), rel))
        for name, line, length in functions(lines):
            fns.append((length, f"{rel}:{line} {name}"))
    files.sort(reverse=True)
    fns.sort(reverse=True)
    if report:
        print(f"longest files (non-test lines, limit {MAX_FILE_LINES}):")
        for n, rel in files[:report]:
            print(f"  {n:5} {rel}")
        print(f"longest functions (lines, limit {MAX_FN_LINES}):")
        for n, where in fns[:report]:
            print(f"  {n:5} {where}")
    bad = [f"file {rel}: {n} lines (limit {MAX_FILE_LINES})" for n, rel in files if n > MAX_FILE_LINES]
    bad += [f"function {w}: {n} lines (limit {MAX_FN_LINES})" for n, w in fns if n > MAX_FN_LINES]
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
