#!/usr/bin/env python3
"""Builds the long suite's one-clause tasks, for its calibration (examples/long/README.md,
"Calibration").

For clause k of a task the one-clause task is:
  - goal: the clause's goal line; the only criterion: its [[acceptance]] entry (other keys of
    the task file are kept: roles, budget, protected_paths, gui);
  - workspace: workspace/ with the parts of reference/ that clauses 1..k-1 own laid in
    (PARTS below: top-level functions of a Python file, plus the task's helpers; the skeletons
    already register every command's stub in COMMANDS / STAGES);
  - hidden/check.sh: runs the task's own hidden script and keeps clause k's line.

A staged workspace must pass the earlier clauses' public checks and fail clause k's. One that
does not (a reference function that already does clause k's work, a clause that is not a
function) is reported as not stageable and left out, never run.

Usage: one_clause.py OUT [--clauses first|all|1,3] [TASK...]
Writes OUT/<task>-c<k>/{task.toml,workspace/,hidden/check.sh} and OUT/STAGING.txt, and prints
one line per clause: built, or why not.
"""
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Per task: helpers every staged workspace gets (not a clause's own work), and per clause (in
# goal order) the top-level functions it owns as (file, name), or (file, name, source) where
# the clause builds only part of the reference's function (a later clause finishes it): source
# is the function as that clause leaves it. None: the clause is not a set of functions.

# ledger-cli's `load` before its amounts are ints, and pipeline-orders' `stage_clean` before
# it drops empty rows.
LOAD_AS_READ = '''def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
'''
CLEAN_STRIP_ONLY = '''def stage_clean(indir, outdir):
    header, rows = read_csv(os.path.join(indir, "orders.csv"))
    write_csv(os.path.join(outdir, "clean.csv"), header, [[v.strip() for v in row] for row in rows])
'''
PARTS = {
    "textkit-lib": {
        "helpers": [],
        "clauses": [[("textkit.py", n)] for n in [
            "strip_accents", "slugify", "words", "word_counts", "top_words", "truncate",
            "wrap", "number_lines", "camel_to_snake", "snake_to_camel"]],
    },
    "bughunt-shop": {
        "helpers": [],
        "clauses": [[("money.py", "to_cents")], [("money.py", "format_cents")],
                    [("money.py", "split_evenly")], [("inventory.py", "add_stock")],
                    [("inventory.py", "remove_stock")], [("inventory.py", "low_stock")],
                    [("orders.py", "line_total")], [("orders.py", "apply_coupon")],
                    [("orders.py", "order_total")], [("orders.py", "receipt")]],
    },
    "ledger-cli": {
        "helpers": [],
        "clauses": [[("ledger.py", "load", LOAD_AS_READ)], [("ledger.py", "load")],
                    [("ledger.py", "cmd_count")],
                    [("ledger.py", "cmd_total")], [("ledger.py", "cmd_total")],
                    [("ledger.py", "cmd_categories")], [("ledger.py", "cmd_month")],
                    [("ledger.py", "cmd_top")], [("ledger.py", "cmd_add")],
                    None, None, None, None],
    },
    "pipeline-orders": {
        "helpers": [("pipeline.py", n) for n in ["cents", "money", "problem", "joined", "group"]],
        "clauses": [[("pipeline.py", "stage_clean", CLEAN_STRIP_ONLY)]] + [
            [("pipeline.py", "stage_" + n)] for n in [
            "clean", "valid", "rejects", "dedupe", "join", "daily", "countries", "products",
            "summary", "all"]],
    },
    # Clause 2 (report.py imports what clause 1 copied) is not a function: it owns nothing,
    # and the clauses after it are not stageable.
    "refactor-report": {
        "helpers": [],
        "clauses": [[("salesdata.py", "load"), ("salesdata.py", "revenue")], []] + [None] * 8,
    },
    "web-shopping": {"helpers": [], "clauses": None},
}


def top_level(tree, name):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
    return None


def span(node):
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start - 1, node.end_lineno


def insertion_line(tree):
    """Where a new function goes: before main, else before the `__main__` block, else at the end."""
    node = top_level(tree, "main")
    if node is not None:
        return span(node)[0]
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            return node.lineno - 1
    return None


def lay_in(source, reference, names):
    """source with each of names' reference definition put in (replacing its own) and the
    reference's imports added."""
    ref_tree = ast.parse(reference)
    ref_lines = reference.splitlines(keepends=True)
    for name in names:
        ref_node = top_level(ref_tree, name)
        if ref_node is None:
            raise ValueError(f"reference has no top-level {name}")
        a, b = span(ref_node)
        block = "".join(ref_lines[a:b])
        lines = source.splitlines(keepends=True)
        tree = ast.parse(source)
        own = top_level(tree, name)
        if own is not None:
            s, e = span(own)
            lines[s:e] = [block]
        else:
            at = insertion_line(tree)
            at = len(lines) if at is None else at
            lines[at:at] = [block, "\n\n"]
        source = "".join(lines)
    tree = ast.parse(source)
    have = {ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    missing = [ast.unparse(n) + "\n" for n in ref_tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom)) and ast.unparse(n) not in have]
    if missing:
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        lines = source.splitlines(keepends=True)
        at = imports[-1].end_lineno if imports else (
            tree.body[0].end_lineno if tree.body and isinstance(tree.body[0], ast.Expr) else 0)
        lines[at:at] = missing
        source = "".join(lines)
    return source


def run_check(command, workspace, env):
    with tempfile.TemporaryDirectory(prefix="one-clause-") as scratch:
        shutil.copytree(workspace, scratch, dirs_exist_ok=True, symlinks=True)
        try:
            done = subprocess.run(["sh", "-c", command], cwd=scratch, env=env, timeout=180,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0


def toml_str(s):
    return '"""\n' + s.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '\n"""' \
        if "\n" in s else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise ValueError(f"no TOML for {v!r}")


def task_toml(task, entry, name):
    out = [f'name = {toml_str(name)}', f'goal = {toml_str(entry["clause"])}']
    if task.get("protected_paths"):
        out.append(f'protected_paths = {toml_value(task["protected_paths"])}')
    for key in ("roles", "budget", "gui"):
        if key in task:
            out.append(f"\n[{key}]")
            out += [f"{k} = {toml_value(v)}" for k, v in task[key].items()]
    out.append("\n[[acceptance]]")
    out += [f"{k} = {toml_value(v)}" for k, v in entry.items()]
    return "\n".join(out) + "\n"


def build(out, task_name, k, env):
    """Builds clause k (1-based) of task_name under out; returns a line saying what happened."""
    tdir = os.path.join(HERE, task_name)
    with open(os.path.join(tdir, "task.toml"), "rb") as f:
        task = tomllib.load(f)
    entries = task["acceptance"]
    entry = entries[k - 1]
    parts = PARTS.get(task_name, {})
    clauses = parts.get("clauses")
    # (file, name, source or None), in the order they are laid in: a later clause's part
    # replaces an earlier one's.
    staged = []
    if k > 1:
        if clauses is None or any(c is None for c in clauses[:k - 1]) or clauses[k - 1] is None:
            return f"{task_name} clause {k} ({entry['id']}): not stageable (its clauses are not functions)"
        for part in parts["helpers"] + [p for c in clauses[:k - 1] for p in c]:
            staged.append((part[0], part[1], part[2] if len(part) > 2 else None))
    name = f"{task_name}-c{k}"
    dest = os.path.join(out, name)
    shutil.rmtree(dest, ignore_errors=True)
    ws = os.path.join(dest, "workspace")
    shutil.copytree(os.path.join(tdir, "workspace"), ws, symlinks=True)
    for file, function, partial in staged:
        path = os.path.join(ws, file)
        source = ""
        if os.path.exists(path):
            with open(path) as f:
                source = f.read()
        if partial is None:
            with open(os.path.join(tdir, "reference", file)) as f:
                partial = f.read()
        with open(path, "w") as f:
            f.write(lay_in(source, partial, [function]))
    check_env = dict(env)
    gui = task.get("gui", {})
    if "url" in gui:
        check_env["LOOPGATE_GUI_URL"] = gui["url"]
    if "serve" in gui:
        check_env["LOOPGATE_GUI_SERVE"] = gui["serve"]
    earlier = [e for e in entries[:k - 1] if e.get("check")]
    broken = [e["id"] for e in earlier if not run_check(e["check"], ws, check_env)]
    if broken:
        shutil.rmtree(dest)
        return f"{task_name} clause {k} ({entry['id']}): not stageable (staged workspace fails earlier {', '.join(broken)})"
    if run_check(entry["check"], ws, check_env):
        shutil.rmtree(dest)
        return f"{task_name} clause {k} ({entry['id']}): not stageable (staged workspace already passes it)"
    with open(os.path.join(dest, "task.toml"), "w") as f:
        f.write(f"# kind: one clause of {task_name}: {entry['id']}\n" + task_toml(task, entry, name))
    os.makedirs(os.path.join(dest, "hidden"))
    hidden = os.path.join(tdir, "hidden", "check.sh")
    with open(os.path.join(dest, "hidden", "check.sh"), "w") as f:
        f.write("#!/bin/sh\n"
                f"# Clause {k} of {task_name}: its line of the task's hidden script.\n"
                f"line=$(sh '{hidden}' | grep -E '^(PASS|FAIL) {entry['id']}$')\n"
                'echo "${line:-FAIL ' + entry["id"] + '}"\n'
                'case "$line" in PASS*) exit 0 ;; esac\nexit 1\n')
    os.chmod(os.path.join(dest, "hidden", "check.sh"), 0o755)
    by_file = {}
    for file, function, partial in staged:
        # A later clause's part replaces an earlier one's: the last label of a function stands.
        by_file.setdefault(file, {})[function] = function + (" (partial)" if partial else "")
    staged_desc = ", ".join(f"{f}: {' '.join(n.values())}" for f, n in by_file.items()) or "none"
    return f"{task_name} clause {k} ({entry['id']}): built {name} (staged from reference: {staged_desc})"


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out, rest = argv[0], argv[1:]
    spec = "first"
    if rest[:1] == ["--clauses"] and len(rest) > 1:
        spec, rest = rest[1], rest[2:]
    tasks = rest or sorted(t for t in os.listdir(HERE)
                           if os.path.isfile(os.path.join(HERE, t, "task.toml")))
    env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(HERE))
    for cand in [os.environ.get("CARGO_TARGET_DIR", ""), os.path.expanduser("~/.cache/loopgate/target"),
                 os.path.join(repo, "target")]:
        for kind in ("release", "debug"):
            if cand and os.path.isfile(os.path.join(cand, kind, "loopgate")):
                env["PATH"] = os.path.join(cand, kind) + os.pathsep + env.get("PATH", "")
                break
    os.makedirs(out, exist_ok=True)
    lines = []
    for t in tasks:
        with open(os.path.join(HERE, t, "task.toml"), "rb") as f:
            n = len(tomllib.load(f)["acceptance"])
        ks = (range(1, n + 1) if spec == "all" else [1] if spec == "first"
              else [int(x) for x in spec.split(",") if x])
        for k in ks:
            if not 1 <= k <= n:
                print(f"{t} has clauses 1 to {n}, not {k}", file=sys.stderr)
                return 2
            line = build(out, t, k, env)
            print(line, flush=True)
            lines.append(line)
    with open(os.path.join(out, "STAGING.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
