# The shared part of examples/long/<task>/hidden/check.sh, sourced by each as
#   . "$(dirname "$0")/../../lib/hidden-harness.sh"
# so a check.sh must be run by its path (`sh examples/long/<task>/hidden/check.sh`), which is
# how the bench and verify.sh run it. run_hidden_criteria reads the task's criteria (Python
# `@check("<id>")` functions) on stdin, puts them between hidden_harness.py (the helpers and
# the runner) and `sys.exit(main())` in a temporary file, and runs that with python3 in the
# current directory: the scratch copy of the snapshot being judged.
hidden_lib=$(cd "$(dirname "$0")/../../lib" 2>/dev/null && pwd)

run_hidden_criteria() {
  if [ -z "$hidden_lib" ] || [ ! -f "$hidden_lib/hidden_harness.py" ]; then
    echo "hidden-harness: no examples/long/lib/hidden_harness.py beside $0; run check.sh by its path" >&2
    exit 2
  fi
  h=$(mktemp -d) || exit 2
  trap 'rm -rf "$h"' EXIT
  { cat "$hidden_lib/hidden_harness.py" && cat && printf '\n\nsys.exit(main())\n'; } > "$h/hidden.py" || exit 2
  python3 "$h/hidden.py"
}
