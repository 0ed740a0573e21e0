#!/usr/bin/env python3
"""The calibration's table (examples/long/calibrate.sh): one row per one-clause task, from
OUT/try-<i>/long-<model>.json and each try's final tree (OUT/try-<i>/runs-long-<model>/
<task>.single_shot.tree, where the public check is run again here, in a scratch copy, as the
auditor runs it), with the public check's and the hidden criterion's passes over
the tries, the tokens and the wall time per try, and whether the clause is calibrated (its
public check passes in at least half the tries). A try whose model call timed out (the
machine, not the model) is left out of the counts and shown in its own column. Clauses not
stageable (OUT/suite/STAGING.txt) are listed below the table.

Usage: calibration_table.py OUT MODEL
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

SUITE_LIB = os.path.dirname(os.path.abspath(__file__))


def public_pass(out, tree, task):
    """Whether the one-clause task's public check passes on a try's final tree."""
    if not os.path.isdir(tree):
        return False
    with open(os.path.join(out, "suite", task, "task.toml"), "rb") as f:
        doc = tomllib.load(f)
    entry = doc["acceptance"][0]
    env = dict(os.environ)
    gui = doc.get("gui", {})
    if "url" in gui:
        env["LOOPGATE_GUI_URL"] = gui["url"]
    if "serve" in gui:
        env["LOOPGATE_GUI_SERVE"] = gui["serve"]
    bin_dir = os.environ.get("LOOPGATE_BIN_DIR")
    if bin_dir:
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="calibration-") as scratch:
        shutil.copytree(tree, scratch, dirs_exist_ok=True, symlinks=True)
        try:
            done = subprocess.run(["sh", "-c", entry["check"]], cwd=scratch, env=env,
                                  timeout=entry.get("timeout_secs", 120),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def main(out, model):
    rows = {}
    timed_out = {}
    cache_path = os.path.join(out, "public-checks.json")
    cache = {}
    if os.path.isfile(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    for path in sorted(glob.glob(os.path.join(out, "try-*", f"long-{model}.json"))):
        with open(path) as f:
            doc = json.load(f)
        for r in doc.get("results", []):
            tree = os.path.join(os.path.dirname(path), f"runs-long-{model}",
                                f"{r['task']}.{r['arm']}.tree")
            key = f"{tree}@{r.get('run_ids', [''])[-1:]}"
            if key not in cache:
                cache[key] = public_pass(out, tree, r["task"])
            r["public_now"] = cache[key]
            if r.get("terminal_state") == "bench_error":
                continue
            if "did not answer in time" in r.get("note", ""):
                timed_out[r["task"]] = timed_out.get(r["task"], 0) + 1
                continue
            rows.setdefault(r["task"], []).append(r)
    staging = []
    staging_path = os.path.join(out, "suite", "STAGING.txt")
    if os.path.isfile(staging_path):
        with open(staging_path) as f:
            staging = [line.strip() for line in f if line.strip()]
    order = [line.split(": built ")[1].split()[0] for line in staging if ": built " in line]
    print(f"| one-clause task | tries | public check passes | hidden passes | finish claimed "
          f"| tokens per try | wall per try (s) | calibrated (public >= half) | left out: model timed out |")
    print("|---|---|---|---|---|---|---|---|---|")
    calibrated = tried = 0
    for task in order + sorted(set(rows) - set(order)):
        rs = rows.get(task, [])
        if not rs:
            if timed_out.get(task):
                print(f"| {task} | 0 | - | - | - | - | - | - | {timed_out[task]} |")
            continue
        n = len(rs)
        public = sum(1 for r in rs if r["public_now"])
        hidden = sum(1 for r in rs if r["hidden_passed"] >= 1)
        claimed = sum(1 for r in rs if r["claimed_done"])
        tokens = round(sum(r["tokens"] for r in rs) / n)
        wall = round(sum(r["wall_s"] for r in rs) / n)
        ok = 2 * public >= n
        tried += 1
        calibrated += ok
        print(f"| {task} | {n} | {public}/{n} | {hidden}/{n} | {claimed}/{n} | {tokens:,} | {wall} "
              f"| {'yes' if ok else 'no'} | {timed_out.get(task, 0)} |")
    print(f"\n{calibrated} of {tried} one-clause tasks tried are calibrated.")
    with open(cache_path, "w") as f:
        json.dump(cache, f, indent=1)
    skipped = [line for line in staging if "not stageable" in line]
    if skipped:
        print("\nNot stageable (not run):\n")
        for line in skipped:
            print(f"- {line}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
