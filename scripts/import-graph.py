#!/usr/bin/env python3
"""The broker crate's import graph, for issue 24's before/after figures.

    python3 scripts/import-graph.py [--verbose] [SRC_DIR]     (default broker/src)

Prints three things:
  1. the files that import `crate::broker::Broker` (the wiring type every layer leans on);
  2. the import cycles: strongly connected components among top-level modules
     (broker.rs, coordinator/, metadata/, ...) and among files;
  3. the error-code picks outside error.rs: lines naming a `ResponseError::` variant or a
     non-zero numeric error code, which issue 24 wants chosen in error.rs only.

Imports are read from `use` trees and inline `crate::` / `super::` paths, with comments and
`#[cfg(test)]` modules left out (test code may import what it likes). A path is resolved to the
deepest module file it names, so `crate::coordinator::txn::TxnError` is an edge to
coordinator/txn/mod.rs. Names re-exported by a `mod.rs` count as edges to that `mod.rs`: that
is the file the importer depends on. No third-party parser: regular expressions over the
source are exact enough for Brook's rustfmt-formatted code.
"""

import os
import re
import sys
from collections import defaultdict

# A `use` statement: at a line's start (so "use" in a string is not one), possibly `pub`.
USE = re.compile(r"^[ \t]*(?:pub(?:\([a-z]+\))?\s+)?use\s+([^;]+);", re.M)
PICK = re.compile(
    r"ResponseError::|error_code\s*[:=]\s*-?[1-9]\d*\b|with_error_code\(\s*-?[1-9]\d*\s*\)"
)


def module_of(rel):
    """`coordinator/txn/mod.rs` -> ('coordinator', 'txn'); `lib.rs` -> ()."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # Line comments, but not `//` inside a string literal (good enough: Brook's strings rarely hold `//`).
    return "\n".join(re.sub(r'^((?:[^"/]|"[^"]*"|/(?!/))*)//.*$', r"\1", l) for l in text.split("\n"))


def without_tests(text):
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text


def expand_use(tree):
    """`a::{b, c::{d, e as f}, self}` -> [[a, b], [a, c, d], [a, c, e], [a]]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    out = []

    def walk(prefix, s):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for item in filter(None, items):
            if "{" in item:
                head, rest = item.split("{", 1)
                head_parts = [p for p in head.split("::") if p]
                walk(prefix + head_parts, rest[: rest.rindex("}")])
            else:
                parts = [p for p in item.split("::") if p]
                if parts == ["self"]:
                    out.append(prefix)
                else:
                    out.append(prefix + parts)

    walk([], tree)
    return out


def absolute(path, here):
    """Resolve `crate::`, `super::`, `self::` against the importing module `here`."""
    if not path:
        return None
    if path[0] == "crate":
        return path[1:]
    base = list(here)
    i = 0
    while i < len(path) and path[i] in ("super", "self"):
        if path[i] == "super":
            if not base:
                return None
            base.pop()
        i += 1
    if i == 0:
        return None  # an external crate or a local name
    return base + path[i:]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    src = args[0] if args else "broker/src"
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, n), src)
                with open(os.path.join(root, n)) as f:
                    files[rel] = f.read()
    modules = {module_of(rel): rel for rel in files}

    def resolve(path):
        for k in range(len(path), -1, -1):
            if tuple(path[:k]) in modules:
                return modules[tuple(path[:k])]
        return None

    edges = defaultdict(set)
    broker_importers = []
    for rel, text in sorted(files.items()):
        here = module_of(rel)
        code = without_tests(strip_comments(text))
        paths = []
        for m in re.finditer(USE, code):
            paths += expand_use(m.group(1))
        no_use = re.sub(USE, "", code)
        paths += [p.split("::") for p in re.findall(r"\b(?:crate|super)(?:::\w+)+", no_use)]
        imports_broker = False
        for p in paths:
            a = absolute(p, here)
            if a is None:
                continue
            if a[:2] == ["broker", "Broker"]:
                imports_broker = True
            target = resolve(a)
            if target and target != rel and target not in ("lib.rs", "main.rs"):
                edges[rel].add(target)
        if imports_broker and rel != "broker.rs":
            broker_importers.append(rel)

    print(f"== files importing crate::broker::Broker: {len(broker_importers)} of {len(files)}")
    if verbose:
        for f in broker_importers:
            print("  ", f)

    def top(rel):
        m = module_of(rel)
        return m[0] if m else "crate"

    mod_edges = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            if top(a) != top(b):
                mod_edges[top(a)].add(top(b))
    mod_sccs = [c for c in sccs({top(f) for f in files}, mod_edges) if len(c) > 1]
    print(f"== module-level cycles: {len(mod_sccs)}")
    for c in mod_sccs:
        print(f"   {len(c)} modules: {' '.join(sorted(c))}")
    file_sccs = [c for c in sccs(set(files), edges) if len(c) > 1]
    sizes = sorted((len(c) for c in file_sccs), reverse=True)
    print(f"== file-level cycles: {len(file_sccs)} (sizes {sizes}), {sum(sizes)} files in a cycle")
    for c in sorted(file_sccs, key=len, reverse=True):
        shown = sorted(c) if verbose or len(c) <= 20 else sorted(c)[:20] + ["..."]
        print(f"   {len(c)} files: {' '.join(shown)}")

    picks = defaultdict(lambda: [0, 0])
    for rel, text in files.items():
        if rel == "error.rs":
            continue
        code = strip_comments(text)
        body = without_tests(code)
        for i, line in enumerate(code.split("\n")):
            if PICK.search(line):
                picks[rel][0 if i < body.count("\n") + 1 else 1] += 1
    outside = {f: n for f, n in picks.items() if n[0]}
    total = sum(n[0] for n in outside.values())
    tests = sum(n[1] for n in picks.values())
    print(f"== error-code picks outside error.rs: {total} lines in {len(outside)} files (+{tests} in tests)")
    for f, n in sorted(outside.items(), key=lambda kv: (-kv[1][0], kv[0])):
        print(f"   {n[0]:3} {f}")


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                out.append(comp)
    return out


if __name__ == "__main__":
    main()
