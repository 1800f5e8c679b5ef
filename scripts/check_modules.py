#!/usr/bin/env python3
"""Import circles between the modules (files) of each crate: a file that uses another which, through
any chain of uses, uses it back. Such circles tangle a crate: neither side can be read, tested or
moved without the other. Exits 1 and prints every circle not explained in the code.

A circle is explained by a comment `// module-cycle: <why>` in one of its files; such circles are
listed but do not fail the check.

What counts as a use: a `crate::`, `super::` or `self::` path (in a `use` or inline) that names a
module of the crate, resolved to the file of the longest module path it names. Re-exports of a
`lib.rs` or `mod.rs` (`pub use`, `pub(crate) use`) are the crate's or module's face, not a use, and
`mod x;` declarations are not uses either. Test modules (`#[cfg(test)]` to the end of the file)
are left out: tests may use whatever they test.

    scripts/check_modules.py [-v]
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES_DIR = os.path.join(ROOT, "crates")
EXPLAINED = re.compile(r"//\s*module-cycle:\s*\S")
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\b(crate|super|self)::((?:[A-Za-z_][A-Za-z0-9_]*::)*)\{([^;]*?)\};", re.S)
REEXPORT = re.compile(r"^\s*pub(?:\([^)]*\))?\s+use\b[^;]*;", re.M | re.S)


def module_files(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("lib", "main", "mod"):
                rel = rel[:-1]
            out[tuple(rel)] = path
    return out


def strip(text):
    """The text without comments, string literals and the trailing test module."""
    cut = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*mod\s+\w+", text, re.M)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def resolve(base, segments, modules):
    """The longest module path of `base + segments` that has a file."""
    full = list(base) + segments
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in modules:
            return tuple(full[:n])
    return None


def anchor(kind, here):
    """The module a `crate`/`super`/`self` path starts from, seen from module `here`."""
    if kind == "crate":
        return ()
    if kind == "self":
        return here
    return here[:-1]


def uses(path, here, modules):
    text = strip(open(path, encoding="utf-8").read())
    is_facade = os.path.basename(path) in ("lib.rs", "mod.rs", "main.rs")
    if is_facade:
        text = REEXPORT.sub("", text)
    found = set()
    # Grouped uses: `use crate::a::{b, c::d};`
    for m in USE_GROUP.finditer(text):
        base = anchor(m.group(1), here)
        prefix = [s for s in m.group(2).split("::") if s]
        for item in re.split(r",", m.group(3)):
            item = re.sub(r"\{.*", "", item).strip()
            segs = [s for s in item.split("::") if s and s not in ("self", "*")]
            target = resolve(base, prefix + segs[:1], modules)
            if target is not None:
                found.add(target)
    text = USE_GROUP.sub("", text)
    for m in PATH.finditer(text):
        base = anchor(m.group(1), here)
        segs = [s for s in m.group(2).split("::") if s]
        target = resolve(base, segs, modules)
        if target is not None:
            found.add(target)
    found.discard(here)
    return found


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    verbose = "-v" in sys.argv
    failed = 0
    for crate in sorted(os.listdir(CRATES_DIR)):
        src = os.path.join(CRATES_DIR, crate, "src")
        if not os.path.isdir(src):
            continue
        modules = module_files(src)
        graph = {m: uses(f, m, modules) for m, f in modules.items()}
        for comp in cycles(graph):
            names = ["::".join(m) or "(root)" for m in comp]
            explained = any(
                EXPLAINED.search(open(modules[m], encoding="utf-8").read()) for m in comp
            )
            label = "explained" if explained else "CIRCLE"
            if not explained:
                failed += 1
            if not explained or verbose:
                print(f"{crate}: {label}: {', '.join(names)}", file=sys.stderr)
                if verbose:
                    for m in comp:
                        inner = sorted("::".join(t) for t in graph[m] if t in comp)
                        print(f"    {'::'.join(m) or '(root)'} -> {', '.join(inner)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
