#!/usr/bin/env python3
"""File-level import cycles inside Rust crates.

For each crate directory given (default: every workspace member), every `crate::`, `super::`
and `self::` path in non-test code is resolved to the file that defines the module it names
(following `pub use` re-exports), giving a graph of file -> file edges. A cycle in that graph
(two files that need each other, directly or through others) is reported and the exit status
is 1. `mod` declarations are not edges; `#[cfg(test)]` modules and files that only tests
include are left out, since test code may reach anywhere.

    scripts/import_cycles.py [CRATE_DIR ...]
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])'", "''", text)
    return text


def strip_test_modules(text):
    """Drop `#[cfg(test)]` items (a module body or a `mod x;` line)."""
    out = []
    i = 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = m.end()
        # Skip to the end of the item: either `;` before any `{`, or the matching `}`.
        semi = text.find(";", j)
        brace = text.find("{", j)
        if brace == -1 or (semi != -1 and semi < brace):
            i = semi + 1 if semi != -1 else len(text)
            continue
        depth = 0
        k = brace
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    if "{" not in tree:
        return [re.sub(r"\s+as\s+" + IDENT + "$", "", tree).strip()]
    brace = tree.index("{")
    prefix = tree[:brace]
    inner = tree[brace + 1:tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    result = []
    for part in parts:
        if part.strip():
            for sub in expand_use_tree(part):
                result.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return result


class Crate:
    def __init__(self, root_dir):
        self.src = os.path.join(root_dir, "src")
        self.files = {}  # module path tuple -> file
        self.test_only = set()
        for root_file in ("lib.rs", "main.rs"):
            path = os.path.join(self.src, root_file)
            if os.path.exists(path) and () not in self.files:
                self.files[()] = path
        if () in self.files:
            self.walk((), self.files[()])
        self.reexports = {mod: self.pub_uses(mod) for mod in self.files}

    def child_file(self, mod_path, file, name, path_attr):
        base = os.path.dirname(file)
        is_mod_root = os.path.basename(file) in ("lib.rs", "main.rs", "mod.rs")
        if path_attr:
            return os.path.normpath(os.path.join(base, path_attr))
        here = base if is_mod_root else os.path.join(base, os.path.splitext(os.path.basename(file))[0])
        for candidate in (os.path.join(here, name + ".rs"), os.path.join(here, name, "mod.rs")):
            if os.path.exists(candidate):
                return candidate
        return None

    def walk(self, mod_path, file):
        text = strip_comments_and_strings(open(file, encoding="utf-8").read())
        pattern = (r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;")
        for m in re.finditer(pattern, text):
            attrs, name = m.group(1), m.group(2)
            path_attr = re.search(r'#\[path\s*=\s*"([^"]*)"\]', open(file, encoding="utf-8").read()[:0] + attrs)
            child = self.child_file(mod_path, file, name, path_attr.group(1) if path_attr else None)
            if child is None:
                continue
            key = mod_path + (name,)
            self.files[key] = child
            if "cfg(test)" in attrs or mod_path in self.test_only:
                self.test_only.add(key)
            self.walk(key, child)

    def code(self, mod_path):
        text = strip_comments_and_strings(open(self.files[mod_path], encoding="utf-8").read())
        return strip_test_modules(text)

    def pub_uses(self, mod_path):
        exports = {}
        for m in re.finditer(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", self.code(mod_path)):
            for path in expand_use_tree(m.group(1)):
                last = path.split("::")[-1].strip()
                exports[last] = path
        return exports

    def resolve(self, from_mod, path, depth=0):
        """The module (tuple) a path lands in, or None when it leaves the crate."""
        segs = [s for s in path.replace(" ", "").split("::") if s]
        if not segs:
            return None
        if segs[0] == "crate":
            cur, segs = (), segs[1:]
        elif segs[0] in ("self", "super"):
            cur = from_mod
            while segs and segs[0] in ("self", "super"):
                if segs[0] == "super":
                    cur = cur[:-1]
                segs = segs[1:]
        else:
            # A path relative to the current module: a child module name.
            if from_mod + (segs[0],) in self.files:
                cur = from_mod
            else:
                return None
        for seg in segs:
            if cur + (seg,) in self.files:
                cur = cur + (seg,)
                continue
            target = self.reexports.get(cur, {}).get(seg)
            if target is not None and depth < 8:
                resolved = self.resolve(cur, target, depth + 1)
                if resolved is not None:
                    return resolved
            break
        return cur

    def edges(self):
        graph = {}
        for mod_path in self.files:
            if mod_path in self.test_only:
                continue
            code = self.code(mod_path)
            targets = set()
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths.extend(expand_use_tree(m.group(1)))
            # Whole paths only: `crate::a::{b, c}` is a group, expanded above.
            paths.extend(
                re.findall(r"\b(?:crate|super|self)(?:::" + IDENT + r")+(?![\w:])", code)
            )
            for path in paths:
                head = path.strip().split("::")[0]
                if head not in ("crate", "super", "self") and (mod_path + (head,)) not in self.files:
                    continue
                target = self.resolve(mod_path, path)
                if target is None or target == mod_path or target in self.test_only:
                    continue
                targets.add(target)
            graph[mod_path] = targets
        return graph


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def workspace_members(root):
    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    block = re.search(r"members\s*=\s*\[([^\]]*)\]", text, flags=re.S)
    return re.findall(r'"([^"]+)"', block.group(1)) if block else []


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = argv[1:] or workspace_members(root)
    found = 0
    for crate_dir in crates:
        path = crate_dir if os.path.isabs(crate_dir) else os.path.join(root, crate_dir)
        crate = Crate(path)
        if not crate.files:
            continue
        for component in cycles(crate.edges()):
            found += 1
            names = [os.path.relpath(crate.files[m], root) for m in component]
            print(f"import cycle in {crate_dir}: " + " <-> ".join(names))
    if found:
        print(f"{found} file-level import cycle(s)")
        return 1
    print(f"no file-level import cycles in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
