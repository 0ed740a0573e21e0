"""The harness every examples/long/<task>/hidden/check.sh shares (examples/long/README.md).

lib/hidden-harness.sh writes this file, then the task's criteria (`@check("<id>")` functions, in
the goal's order), then `sys.exit(main())` into one temporary script and runs it with python3
in a scratch copy of the snapshot being judged. `main` runs each criterion in its own fresh copy
of that directory and its own Python process (`TIMEOUT` seconds; a task may set its own after
this file) and prints `PASS <id>` or `FAIL <id>` per criterion; it exits 0 only if all pass.
"""
import os
import shutil
import subprocess
import sys
import tempfile

TIMEOUT = 60
CHECKS = []


def check(cid):
    def add(fn):
        CHECKS.append((cid, fn))
        return fn
    return add


def run(*argv, stdin=None):
    """Run a command in the criterion's copy; text output."""
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=30)


def py(*args):
    return run(sys.executable, *args)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def eq(got, want, what="value"):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        sys.path.insert(0, os.getcwd())
        dict(CHECKS)[sys.argv[2]]()
        return 0
    src = os.getcwd()
    failed = 0
    for cid, _ in CHECKS:
        tmp = tempfile.mkdtemp(prefix="hidden-")
        try:
            work = os.path.join(tmp, "w")
            shutil.copytree(src, work, symlinks=True)
            try:
                r = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--one", cid],
                    cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    timeout=TIMEOUT,
                )
                ok, why = r.returncode == 0, (r.stderr or r.stdout).strip().splitlines()[-1:]
            except subprocess.TimeoutExpired:
                ok, why = False, [f"timed out after {TIMEOUT}s"]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(("PASS " if ok else "FAIL ") + cid, flush=True)
        if not ok:
            failed += 1
            if os.environ.get("LONG_HIDDEN_VERBOSE"):
                print(f"    {cid}: {' '.join(why)}", file=sys.stderr, flush=True)
    return 1 if failed else 0
