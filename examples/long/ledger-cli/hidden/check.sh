# Hidden checks of examples/long/ledger-cli: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/ledger-cli/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
OTHER = "date,category,amount\n2025-12-30,gift,30\n2026-01-02,food,-5\n2026-01-02,book,30\n"
EMPTY = "date,category,amount\n"


def cli(*args):
    return py("ledger.py", *args)


def ok_out(r, want, what):
    eq(r.returncode, 0, f"{what}: exit code")
    eq(r.stdout, want, f"{what}: stdout")


@check("load")
def _():
    import ledger
    write("other.csv", OTHER)
    write("empty.csv", EMPTY)
    rows = [{**r, "amount": int(r["amount"])} for r in ledger.load("other.csv")]
    eq(rows, [
        {"date": "2025-12-30", "category": "gift", "amount": 30},
        {"date": "2026-01-02", "category": "food", "amount": -5},
        {"date": "2026-01-02", "category": "book", "amount": 30},
    ], "load(other.csv), amounts read as ints")
    eq(ledger.load("empty.csv"), [], "load of a header-only file")
    eq([r["date"] for r in ledger.load("ledger.csv")][-1], "2026-02-14", "last date")


@check("load-int")
def _():
    import ledger
    write("other.csv", OTHER)
    write("empty.csv", EMPTY)
    eq(ledger.load("other.csv"), [
        {"date": "2025-12-30", "category": "gift", "amount": 30},
        {"date": "2026-01-02", "category": "food", "amount": -5},
        {"date": "2026-01-02", "category": "book", "amount": 30},
    ], "load(other.csv)")
    eq(ledger.load("empty.csv"), [], "load of a header-only file")
    rows = ledger.load("ledger.csv")
    eq([type(r["amount"]) for r in rows], [int] * 6, "amount types")
    eq([r["date"] for r in rows][-1], "2026-02-14", "last date")


@check("count")
def _():
    write("other.csv", OTHER)
    write("empty.csv", EMPTY)
    ok_out(cli("other.csv", "count"), "3\n", "count other.csv")
    ok_out(cli("empty.csv", "count"), "0\n", "count empty.csv")


@check("total")
def _():
    write("other.csv", OTHER)
    write("empty.csv", EMPTY)
    ok_out(cli("ledger.csv", "total"), "1085\n", "total ledger.csv")
    ok_out(cli("other.csv", "total"), "55\n", "total other.csv")
    ok_out(cli("empty.csv", "total"), "0\n", "total empty.csv")


@check("total-category")
def _():
    write("other.csv", OTHER)
    ok_out(cli("ledger.csv", "total", "rent"), "1000\n", "total rent")
    ok_out(cli("ledger.csv", "total", "nope"), "0\n", "total nope")
    ok_out(cli("other.csv", "total", "food"), "-5\n", "total food (other.csv)")
    ok_out(cli("ledger.csv", "total"), "1085\n", "plain total still works")


@check("categories")
def _():
    write("other.csv", OTHER + "2026-01-03,food,1\n")
    write("empty.csv", EMPTY)
    ok_out(cli("other.csv", "categories"), "book\nfood\ngift\n", "categories other.csv")
    ok_out(cli("empty.csv", "categories"), "", "categories empty.csv")


@check("month")
def _():
    write("other.csv", OTHER)
    ok_out(cli("ledger.csv", "month", "2026-01"), "520\n", "month 2026-01")
    ok_out(cli("ledger.csv", "month", "2025-12"), "0\n", "month 2025-12")
    ok_out(cli("other.csv", "month", "2026-01"), "25\n", "month 2026-01 (other.csv)")


@check("top")
def _():
    write("other.csv", OTHER)
    ok_out(cli("ledger.csv", "top", "3"),
           "2026-01-05 rent 500\n2026-02-01 rent 500\n2026-02-02 travel 40\n", "top 3")
    ok_out(cli("other.csv", "top", "2"), "2025-12-30 gift 30\n2026-01-02 book 30\n",
           "top 2 (ties in file order)")
    r = cli("other.csv", "top", "10")
    eq(r.stdout.count("\n"), 3, "top 10 of 3 entries: lines")


@check("add")
def _():
    before = read("ledger.csv")
    ok_out(cli("ledger.csv", "add", "2026-03-01", "food", "7"), "added\n", "add")
    ok_out(cli("ledger.csv", "add", "2026-03-02", "books", "-3"), "added\n", "second add")
    eq(read("ledger.csv"), before + "2026-03-01,food,7\n2026-03-02,books,-3\n", "file after two adds")


@check("unknown-command")
def _():
    r = cli("ledger.csv", "frobnicate")
    eq(r.returncode, 2, "exit code")
    eq(r.stderr, "error: unknown command frobnicate\n", "stderr")
    eq(r.stdout, "", "stdout")


@check("missing-file")
def _():
    for command in (["total"], ["top", "1"]):
        r = cli("missing/none.csv", *command)
        eq(r.returncode, 1, f"{command[0]}: exit code")
        eq(r.stderr, "error: no such file missing/none.csv\n", f"{command[0]}: stderr")
        eq(r.stdout, "", f"{command[0]}: stdout")


@check("bad-amount")
def _():
    before = read("ledger.csv")
    for amount in ("1.5", "abc", "12x"):
        r = cli("ledger.csv", "add", "2026-03-01", "food", amount)
        eq(r.returncode, 2, f"amount {amount}: exit code")
        eq(r.stderr, "error: amount must be an integer\n", f"amount {amount}: stderr")
        eq(r.stdout, "", f"amount {amount}: stdout")
    eq(read("ledger.csv"), before, "the file after refused adds")


@check("usage")
def _():
    for args in ([], ["ledger.csv"]):
        r = cli(*args)
        eq(r.returncode, 2, f"{len(args)} argument(s): exit code")
        eq(r.stderr, "usage: ledger.py FILE COMMAND [ARGS...]\n", f"{len(args)} argument(s): stderr")
        eq(r.stdout, "", f"{len(args)} argument(s): stdout")
PY
