#!/usr/bin/env python3
"""Which workspace crates use each top-level module of `common` and `protocol`.

`common` is the run's core, not a place for code one binary needs: a module of it used by
exactly one binary crate (manager, executor-worker, auditor-worker, cli) and by no other crate
and no other module of `common` belongs to that binary. For each top-level module of
`common/src` and `protocol/src` this lists the crates whose non-test code names it
(`loopgate_common::<module>` / `loopgate_protocol::<module>` paths, `use` trees included) and,
for `common`, whether another of its own modules uses it (`crate::<module>`, `super::<module>`:
such a module is core). Tests do not count as users: `#[cfg(test)]` code, files only tests
include, the crates' `tests/` and `benches/` folders (not read), and the test-only crates
`tests`, `bench` and `test-support`. Exits 1, naming the module and its one user, when a
`common` module has a single binary owner; `protocol` is listed only.

    scripts/single_owner.py [--list]    (--list: print every module with its users)
"""
import os
import re
import sys

from import_cycles import (
    IDENT,
    Crate,
    expand_use_tree,
    strip_comments_and_strings,
    strip_test_modules,
    workspace_members,
)

BINARIES = ("manager", "executor-worker", "auditor-worker", "cli")
# Workspace members that hold only tests, benchmarks or test helpers.
TEST_CRATES = ("tests", "bench", "test-support")
# The crates whose modules are listed: (member directory, Rust crate name, checked).
LISTED = (("common", "loopgate_common", True), ("protocol", "loopgate_protocol", False))


def root_files(src):
    """The files rustc compiles a crate from: lib.rs, main.rs and src/bin targets."""
    roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs")]
    bin_dir = os.path.join(src, "bin")
    if os.path.isdir(bin_dir):
        for entry in sorted(os.listdir(bin_dir)):
            path = os.path.join(bin_dir, entry)
            roots.append(path if entry.endswith(".rs") else os.path.join(path, "main.rs"))
    return [r for r in roots if os.path.isfile(r)]


def compiled_files(src):
    """Every file reached from a crate root by `mod` declarations -> whether only tests reach it."""
    test_only = {}
    pattern = r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;"

    def walk(file, in_test):
        if file in test_only and (in_test or not test_only[file]):
            return
        test_only[file] = in_test
        text = strip_comments_and_strings(open(file, encoding="utf-8").read())
        for m in re.finditer(pattern, text):
            attrs, name = m.group(1), m.group(2)
            path_attr = re.search(r'#\[path\s*=\s*"([^"]*)"\]', attrs)
            child = Crate.child_file(None, (), file, name, path_attr.group(1) if path_attr else None)
            if child is not None:
                walk(child, in_test or "cfg(test)" in attrs)

    for root in root_files(src):
        walk(root, False)
    return test_only


def non_test_code(file):
    return strip_test_modules(strip_comments_and_strings(open(file, encoding="utf-8").read()))


def named_paths(code, crate_name):
    """Every `crate_name::...` path the code names, `use` trees expanded."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        paths.extend(p for p in expand_use_tree(m.group(1)) if p.strip().startswith(crate_name + "::"))
    for m in re.finditer(r"\b" + crate_name + r"::\{", code):
        # An inline group outside a `use`: `loopgate_common::{a, b}` (rare, but a use all the same).
        depth, end = 0, m.end() - 1
        while end < len(code):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
            end += 1
        paths.extend(expand_use_tree(code[m.start():end + 1]))
    paths.extend(re.findall(r"\b" + crate_name + r"(?:::" + IDENT + r")+", code))
    return paths


def top_modules(crate):
    """The crate's top-level modules."""
    return {path[0] for path in crate.files if len(path) == 1}


def module_of(crate, modules, path):
    """The top-level module a `crate_name::a::b` path lands in (through the root's `pub use`)."""
    segs = [s for s in path.replace(" ", "").split("::") if s]
    if len(segs) < 2:
        return None
    head = segs[1]
    if head in modules:
        return head
    target = crate.reexports.get((), {}).get(head)
    if target is not None:
        resolved = crate.resolve((), target)
        if resolved:
            return resolved[0]
    return None


def external_users(root, members, listed_dir, crate_name, crate, modules):
    """Top-level module -> the members whose non-test code names it."""
    users = {m: set() for m in modules}
    for member in members:
        if member == listed_dir or member in TEST_CRATES:
            continue
        src = os.path.join(root, member, "src")
        if not os.path.isdir(src):
            continue
        for file, test_only in compiled_files(src).items():
            if test_only:
                continue
            for path in named_paths(non_test_code(file), crate_name):
                module = module_of(crate, modules, path)
                if module is not None:
                    users[module].add(member)
    return users


def internal_users(crate, modules):
    """Top-level module -> the other top-level modules of the same crate that use it."""
    users = {m: set() for m in modules}
    for mod_path in crate.files:
        if not mod_path or mod_path in crate.test_only:
            continue
        code = crate.code(mod_path)
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths.extend(expand_use_tree(m.group(1)))
        paths.extend(re.findall(r"\b(?:crate|super|self)(?:::" + IDENT + r")+(?![\w:])", code))
        for path in paths:
            if path.strip().split("::")[0] not in ("crate", "super", "self"):
                continue
            target = crate.resolve(mod_path, path)
            if target and target[0] in modules and target[0] != mod_path[0]:
                users[target[0]].add(mod_path[0])
    return users


def main(argv):
    quiet = "--list" not in argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    members = workspace_members(root)
    failures = []
    for listed_dir, crate_name, checked in LISTED:
        crate = Crate(os.path.join(root, listed_dir))
        modules = top_modules(crate)
        outside = external_users(root, members, listed_dir, crate_name, crate, modules)
        inside = internal_users(crate, modules)
        if not quiet:
            print(f"{listed_dir}: module -> crates that use it (+ {listed_dir}'s own modules)")
        for module in sorted(modules):
            crates = sorted(outside[module])
            own = sorted(inside[module])
            if not quiet:
                line = ", ".join(crates) or "-"
                if own:
                    line += f" (+ {listed_dir}: {', '.join(own)})"
                print(f"  {module}: {line}")
            if checked and not own and len(crates) == 1 and crates[0] in BINARIES:
                failures.append(f"{listed_dir}::{module} is used by {crates[0]} only: move it there")
    for failure in failures:
        print(f"single owner: {failure}", file=sys.stderr)
    if failures:
        return 1
    print("single owner: every common module is shared or core")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
