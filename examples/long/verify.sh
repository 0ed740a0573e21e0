#!/bin/sh
# Check every long task both ways (examples/long/README.md):
#   - task.toml parses as a task file (with `loopgate submit` when the CLI is built, else
#     against the task file's keys), every [[acceptance]] has a check and quotes its goal line
#     (clause = ...), and the goal's lines are exactly those clauses, in order;
#   - on a copy of workspace/, every public check FAILS and hidden/check.sh prints one FAIL line
#     per clause id (and exits non-zero);
#   - on workspace/ with reference/ laid over it, every public check PASSES and hidden/check.sh
#     prints one PASS line per clause id (and exits 0); reference/ leaves protected paths alone.
# Every check runs with `sh -c` in its own scratch copy, as the auditor runs it; a task with
# [gui] gets LOOPGATE_GUI_URL and LOOPGATE_GUI_SERVE as the auditor sets them. The web task
# needs `loopgate` (found on PATH, in $LOOPGATE_BIN, or built under $CARGO_TARGET_DIR,
# ~/.cache/loopgate/target or target/) and Chromium.
#
# Usage: examples/long/verify.sh [TASK...]     (exit 0 when every task holds both ways)
here=$(cd "$(dirname "$0")" && pwd)
exec python3 - "$here" "$@" <<'PY'
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = sys.argv[1]
ONLY = sys.argv[2:]
REPO = os.path.dirname(os.path.dirname(HERE))

TASK_KEYS = {"name", "goal", "acceptance", "roles", "budget", "protected_paths", "complete_on_gate",
             "ignore", "plan", "require_approval", "rubric", "rubric_threshold", "threshold",
             "derive_criteria", "gui"}
ACCEPTANCE_KEYS = {"id", "description", "check", "blocking", "timeout_secs", "source", "clause"}
ROLE_KEYS = {"manager", "executor", "auditor"}
BUDGET_KEYS = {"max_rounds", "max_invalid_outputs", "manager_episode_secs", "executor_episode_secs",
               "auditor_episode_secs", "max_steps", "max_total_tokens", "max_cost_usd",
               "max_wall_secs", "max_failed_rounds", "start_secs", "escalate_after",
               "max_done_refusals", "stagnation_rounds", "self_checks", "episode_grace_secs",
               "step_retries", "rollback_regressions"}
GUI_KEYS = {"serve", "url"}


def find_loopgate():
    if os.environ.get("LOOPGATE_BIN"):
        return os.environ["LOOPGATE_BIN"]
    dirs = [os.environ.get("CARGO_TARGET_DIR", ""), os.path.expanduser("~/.cache/loopgate/target"),
            os.path.join(REPO, "target")]
    for d in dirs:
        for profile in ("release", "debug"):
            exe = os.path.join(d, profile, "loopgate")
            if d and os.access(exe, os.X_OK):
                return exe
    return shutil.which("loopgate")


LOOPGATE = find_loopgate()
ENV = dict(os.environ)
if LOOPGATE:
    ENV["PATH"] = os.path.dirname(os.path.abspath(LOOPGATE)) + os.pathsep + ENV.get("PATH", "")
    ENV["LOOPGATE_BIN"] = os.path.abspath(LOOPGATE)


def goal_clauses(goal):
    """common/src/goal/words.rs goal_clauses: sentences, ;-parts and lines, trimmed."""
    clauses, cur = [], []

    def push():
        clause = "".join(cur).strip().rstrip(";").strip()
        if clause:
            clauses.append(clause)
        cur.clear()

    for i, c in enumerate(goal):
        nxt = goal[i + 1] if i + 1 < len(goal) else None
        ends = c in "\n;" or (c in ".!?" and (nxt is None or nxt.isspace()))
        if c != "\n":
            cur.append(c)
        if ends:
            push()
    push()
    return clauses


def lint(task_dir, task):
    """Problems with the task file and the task's layout."""
    problems = []
    unknown = set(task) - TASK_KEYS
    if unknown:
        problems.append(f"unknown task keys {sorted(unknown)}")
    for key, allowed, table in (("roles", ROLE_KEYS, task.get("roles", {})),
                                ("budget", BUDGET_KEYS, task.get("budget", {})),
                                ("gui", GUI_KEYS, task.get("gui", {}))):
        if set(table) - allowed:
            problems.append(f"unknown {key} keys {sorted(set(table) - allowed)}")
    acc = task.get("acceptance", [])
    ids = [a.get("id") for a in acc]
    if len(set(ids)) != len(ids):
        problems.append("duplicate acceptance ids")
    for a in acc:
        if set(a) - ACCEPTANCE_KEYS:
            problems.append(f"{a.get('id')}: unknown keys {sorted(set(a) - ACCEPTANCE_KEYS)}")
        if not a.get("check"):
            problems.append(f"{a.get('id')}: no check")
    clauses = goal_clauses(task.get("goal", ""))
    quoted = [a.get("clause") for a in acc]
    if clauses != quoted:
        problems.append("the goal's lines are not the acceptance clauses in order: "
                        f"{len(clauses)} goal clauses, {len(quoted)} criteria")
        for i, (g, q) in enumerate(zip(clauses, quoted)):
            if g != q:
                problems.append(f"  first difference at {i + 1}: goal {g!r} / clause {q!r}")
                break
    if not 8 <= len(acc) <= 15:
        problems.append(f"{len(acc)} clauses (the suite wants 8-15)")
    roles = task.get("roles", {})
    if any(roles.get(r) != "local" for r in ROLE_KEYS):
        problems.append("roles are not all \"local\"")
    for sub in ("workspace", "reference", "hidden/check.sh"):
        if not os.path.exists(os.path.join(task_dir, sub)):
            problems.append(f"missing {sub}")
    for p in task.get("protected_paths", []):
        ref, ws = os.path.join(task_dir, "reference", p), os.path.join(task_dir, "workspace", p)
        if os.path.exists(ref) and (not os.path.exists(ws) or open(ref, "rb").read() != open(ws, "rb").read()):
            problems.append(f"reference/ changes the protected path {p}")
    if LOOPGATE:
        # `submit` validates the file before it contacts the manager: exit 5 (unreachable) means
        # the task file is valid; exit 1 names the bad field.
        r = subprocess.run([LOOPGATE, "submit", os.path.join(task_dir, "task.toml"),
                            "--server", "http://127.0.0.1:9"], capture_output=True, text=True,
                           env={k: v for k, v in ENV.items() if k != "LOOPGATE_TOKEN"}, timeout=60)
        if r.returncode != 5:
            problems.append(f"loopgate submit refuses task.toml (exit {r.returncode}): "
                            + r.stderr.strip()[-400:])
    return problems


def copy_tree(task_dir, with_reference, dest):
    shutil.copytree(os.path.join(task_dir, "workspace"), dest, symlinks=True)
    if with_reference:
        shutil.copytree(os.path.join(task_dir, "reference"), dest, symlinks=True, dirs_exist_ok=True)


def check_env(task):
    env = dict(ENV)
    gui = task.get("gui") or {}
    if gui.get("url"):
        env["LOOPGATE_GUI_URL"] = gui["url"]
    if gui.get("serve"):
        env["LOOPGATE_GUI_SERVE"] = gui["serve"]
    return env


def run_check(tree, a, env):
    """(passed, output tail) of one public check in its own scratch copy of tree."""
    with tempfile.TemporaryDirectory(prefix="long-check-") as tmp:
        work = os.path.join(tmp, "w")
        shutil.copytree(tree, work, symlinks=True)
        try:
            r = subprocess.run(["sh", "-c", a["check"]], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=a.get("timeout_secs", 120))
            return r.returncode == 0, (r.stdout + r.stderr).strip()[-600:]
        except subprocess.TimeoutExpired:
            return False, "timed out"


def run_hidden(task_dir, tree, env):
    """(exit code, [(PASS|FAIL, id)], stderr) of hidden/check.sh in a scratch copy of tree: run
    by its path, as the bench runs it, so it finds the shared harness in lib/."""
    script = os.path.join(task_dir, "hidden", "check.sh")
    with tempfile.TemporaryDirectory(prefix="long-hidden-") as tmp:
        work = os.path.join(tmp, "w")
        shutil.copytree(tree, work, symlinks=True)
        env = dict(env, LONG_HIDDEN_VERBOSE="1")
        try:
            r = subprocess.run(["sh", script], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            return None, [], "timed out"
    lines = [tuple(l.split(" ", 1)) for l in r.stdout.splitlines() if l.strip()]
    return r.returncode, lines, r.stderr.strip()


def side(task_dir, task, with_reference, problems):
    """Run one side (start or reference); returns (public passing, hidden passing)."""
    want = with_reference
    label = "reference" if with_reference else "start"
    acc = task["acceptance"]
    env = check_env(task)
    with tempfile.TemporaryDirectory(prefix="long-tree-") as tmp:
        tree = os.path.join(tmp, "tree")
        copy_tree(task_dir, with_reference, tree)
        # Browser checks share the [gui] port: one at a time.
        workers = 1 if task.get("gui") else 4
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda a: run_check(tree, a, env), acc))
        for a, (ok, out) in zip(acc, results):
            if ok != want:
                problems.append(f"{label}: public check {a['id']} {'fails' if want else 'passes'}"
                                + (f"\n      {out}" if out else ""))
        rc, lines, err = run_hidden(task_dir, tree, env)
    ids = [a["id"] for a in acc]
    if [i for _, i in lines] != ids or any(v not in ("PASS", "FAIL") for v, _ in lines):
        problems.append(f"{label}: hidden/check.sh printed {lines}, not one PASS/FAIL line per id {ids}")
    for verdict, cid in lines:
        if (verdict == "PASS") != want:
            problems.append(f"{label}: hidden {cid} {verdict}")
    if want and rc != 0:
        problems.append(f"{label}: hidden/check.sh exits {rc}"
                        + (f"; its stderr:\n      {err[-1200:]}" if err else ""))
    if not want and rc == 0:
        problems.append(f"{label}: hidden/check.sh exits 0")
    public = sum(ok for ok, _ in results)
    hidden = sum(v == "PASS" for v, _ in lines)
    return public, hidden


def main():
    names = sorted(d for d in os.listdir(HERE)
                   if os.path.isfile(os.path.join(HERE, d, "task.toml")))
    if ONLY:
        missing = [n for n in ONLY if n not in names]
        if missing:
            print(f"no such task: {' '.join(missing)} (have: {' '.join(names)})")
            return 2
        names = ONLY
    print(f"loopgate: {LOOPGATE or 'not found (task files checked against their keys only)'}")
    failed = 0
    for name in names:
        started = time.time()
        task_dir = os.path.join(HERE, name)
        with open(os.path.join(task_dir, "task.toml"), "rb") as f:
            task = tomllib.load(f)
        kind = open(os.path.join(task_dir, "task.toml")).readline().removeprefix("# kind: ").strip()
        problems = lint(task_dir, task)
        n = len(task.get("acceptance", []))
        if any(p.startswith("missing") for p in problems):
            start = ref = (0, 0)
        else:
            start = side(task_dir, task, False, problems)
            ref = side(task_dir, task, True, problems)
        verdict = "ok" if not problems else "FAILED"
        failed += bool(problems)
        print(f"{name:18} {n:2} clauses  start: public {start[0]}/{n} pass, hidden {start[1]}/{n} pass"
              f"   reference: public {ref[0]}/{n}, hidden {ref[1]}/{n}   {verdict} ({time.time() - started:.0f}s)"
              f"   [{kind}]", flush=True)
        for p in problems:
            print("    " + p)
    print(f"{len(names) - failed} of {len(names)} tasks hold both ways")
    return 1 if failed else 0


sys.exit(main())
PY
