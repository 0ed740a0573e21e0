#!/bin/sh
# The long suite's calibration (examples/long/README.md, "Calibration"): each clause as a
# one-clause task on the workspace the earlier clauses leave (lib/one_clause.py builds them),
# tried TRIES times single-shot with the local model; a clause is calibrated when its public
# check passes in at least half the tries. One clause at a time, all its tries before the next,
# so a sitting cut short still has whole rows; `--resume` in each try's file skips what ran.
#
# Usage: examples/long/calibrate.sh OUT [--tries N] [--clauses first|all|1,3] [--model 1.5b] [TASK...]
# Needs a release build: arms-bench and the daemons under $CARGO_TARGET_DIR/release, or in
# $LOOPGATE_BIN_DIR (a copy, so a rebuild does not change a sitting's binaries midway).
# Writes OUT/suite/ (the one-clause tasks), OUT/try-<i>/long-<model>.json, OUT/calibration.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n 2,10p "$0" >&2; exit 2; }
out=$1; shift
tries=4; clauses=first; model=1.5b
while [ $# -gt 0 ]; do
  case $1 in
    --tries) tries=$2; shift 2 ;;
    --clauses) clauses=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
target=${CARGO_TARGET_DIR:-$HOME/.cache/loopgate/target}
bench=${LOOPGATE_BIN_DIR:-$target/release}/arms-bench
[ -x "$bench" ] || { echo "no $bench: cargo build --release -p loopgate-bench -p loopgate-cli -p loopgate-manager -p loopgate-executor -p loopgate-auditor" >&2; exit 2; }
mkdir -p "$out"
python3 "$here/lib/one_clause.py" "$out/suite" --clauses "$clauses" "$@"
for task in $(sed -n 's/^.*: built \([^ ]*\) .*$/\1/p' "$out/suite/STAGING.txt"); do
  i=1
  while [ "$i" -le "$tries" ]; do
    "$bench" --suite long --long-dir "$out/suite" --arms single_shot --model "$model" \
      --tasks "$task" --out "$out/try-$i" --resume || echo "arms-bench failed on $task try $i" >&2
    i=$((i + 1))
  done
  python3 "$here/lib/calibration_table.py" "$out" "$model" > "$out/calibration.md"
done
cat "$out/calibration.md"
