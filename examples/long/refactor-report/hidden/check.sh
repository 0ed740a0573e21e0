# Hidden checks of examples/long/refactor-report: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/refactor-report/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
import ast
import hashlib

TESTS_SHA256 = "ebf2de204b648a590e4a059c64d9329c66eefc0c647800906e817e3f726bc02f"
OTHER = ("date,region,product,units,price\n"
         "2026-02-01,west,bolt,5,20\n"
         "\n"
         "2026-02-01,east,nut,7,10\n"
         "2026-02-02,west,nut,3,10\n"
         "2026-02-03,east,bolt,1,30\n"
         "  \n"
         "2026-02-04,north,gear,2,5\n")
# other.csv: west 130 (bolt 100, nut 30), east 100 (nut 70, bolt 30), north 10 (gear 10)
# products: bolt 130, nut 100, gear 10, total 240
USAGE = "usage: report.py FILE [--region NAME] [--top N] [--csv]\n"


def tests_green():
    """The ten tests pass and test_report.py is the one the task started with."""
    with open("test_report.py", "rb") as f:
        eq(hashlib.sha256(f.read()).hexdigest(), TESTS_SHA256, "test_report.py's sha256")
    r = py("-m", "unittest", "-q", "test_report")
    if r.returncode != 0:
        raise AssertionError("the ten tests fail: " + r.stderr.strip().splitlines()[-1])


def defined(path):
    """Top-level function definitions of a file, by name."""
    tree = ast.parse(read(path))
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}


def loops(fn):
    return any(isinstance(n, (ast.For, ast.While, ast.comprehension)) for n in ast.walk(fn))


def report_out(*args):
    r = py("report.py", *args)
    eq(r.returncode, 0, f"report.py {' '.join(args)}: exit code")
    eq(r.stderr, "", f"report.py {' '.join(args)}: stderr")
    return r.stdout


def salesdata_loads_other():
    """salesdata.load and salesdata.revenue on another file."""
    import salesdata
    write("other.csv", OTHER)
    rows = salesdata.load("other.csv")
    eq(len(rows), 5, "rows of other.csv (blank lines skipped)")
    eq(rows[-1], {"date": "2026-02-04", "region": "north", "product": "gear", "units": 2, "price": 5}, "last row")
    eq(salesdata.revenue(rows[0]), 100, "revenue of the first row")
    return salesdata


@check("salesdata-copy")
def _():
    salesdata_loads_other()
    tests_green()


@check("salesdata-load")
def _():
    import report
    salesdata = salesdata_loads_other()
    eq(report.load is salesdata.load and report.revenue is salesdata.revenue, True,
       "report.load and report.revenue are salesdata's")
    eq(sorted({"load", "revenue"} & set(defined("report.py"))), [], "defined in report.py")
    tests_green()


@check("total-by")
def _():
    import salesdata
    write("other.csv", OTHER)
    rows = salesdata.load("other.csv")
    eq(salesdata.total_by(rows, "region"), {"west": 130, "east": 100, "north": 10}, "total_by region")
    eq(salesdata.total_by(rows, "date"), {"2026-02-01": 170, "2026-02-02": 30, "2026-02-03": 30,
                                          "2026-02-04": 10}, "total_by date")
    eq(salesdata.total_by([], "region"), {}, "total_by of no rows")
    tests_green()


@check("totals-use-total-by")
def _():
    import report
    write("other.csv", OTHER)
    rows = report.load("other.csv")
    eq(report.region_totals(rows), {"west": 130, "east": 100, "north": 10}, "region_totals")
    eq(report.product_totals(rows), {"bolt": 130, "nut": 100, "gear": 10}, "product_totals")
    fs = defined("report.py")
    for name in ("region_totals", "product_totals"):
        if name not in fs:
            raise AssertionError(f"report.py does not define {name}")
        eq(loops(fs[name]), False, f"{name} has a loop of its own")
        eq("total_by" in ast.unparse(fs[name]), True, f"{name} calls total_by")
    tests_green()


@check("fmt-module")
def _():
    import fmt
    import report
    eq(fmt.money(0), "0.00", "money(0)")
    eq(fmt.money(100), "1.00", "money(100)")
    eq(fmt.render("Empty", {}), ["Empty"], "render of no totals")
    eq(fmt.render("T", {"zz": 123456, "a": 1}), ["T", "  a                0.01", "  zz            1234.56"],
       "render sorted")
    eq(report.money is fmt.money and report.render is fmt.render, True, "report's are fmt's")
    eq(sorted({"money", "render"} & set(defined("report.py"))), [], "defined in report.py")
    tests_green()


OTHER_REPORT = ["By region", "  east             1.00", "  north            0.10", "  west             1.30",
                "By product", "  bolt             1.30", "  gear             0.10", "  nut              1.00",
                "Total 2.40"]


@check("build-report")
def _():
    import report
    write("other.csv", OTHER)
    eq(report.build_report(report.load("other.csv")), OTHER_REPORT, "build_report(other.csv)")
    eq(report.build_report([]), ["By region", "By product", "Total 0.00"], "build_report([])")
    eq(report_out("other.csv"), "\n".join(OTHER_REPORT) + "\n", "report.py other.csv")
    tests_green()


@check("region-option")
def _():
    write("other.csv", OTHER)
    eq(report_out("other.csv", "--region", "west"),
       "By region\n  west             1.30\nBy product\n  bolt             1.00\n  nut              0.30\n"
       "Total 1.30\n", "--region west")
    eq(report_out("other.csv", "--region", "south"), "By region\nBy product\nTotal 0.00\n",
       "--region with no rows")
    eq(report_out("other.csv"), "\n".join(OTHER_REPORT) + "\n", "without --region")
    tests_green()


@check("top-option")
def _():
    write("other.csv", OTHER + "2026-02-05,north,nut,3,10\n")
    # products now: bolt 130, nut 130, gear 10
    base = "By region\n  east             1.00\n  north            0.40\n  west             1.30\nBy product\n"
    eq(report_out("other.csv", "--top", "1"), base + "  bolt             1.30\nTotal 2.70\n",
       "--top 1 (a tie broken by name)")
    eq(report_out("other.csv", "--top", "10"),
       base + "  bolt             1.30\n  nut              1.30\n  gear             0.10\nTotal 2.70\n",
       "--top 10 of 3 products")
    eq(report_out("other.csv", "--region", "east", "--top", "1"),
       "By region\n  east             1.00\nBy product\n  nut              0.70\nTotal 1.00\n",
       "--region east --top 1")
    tests_green()


@check("csv-option")
def _():
    write("other.csv", OTHER)
    eq(report_out("other.csv", "--csv"),
       "section,key,amount\nregion,east,1.00\nregion,north,0.10\nregion,west,1.30\n"
       "product,bolt,1.30\nproduct,gear,0.10\nproduct,nut,1.00\ntotal,,2.40\n", "--csv")
    eq(report_out("other.csv", "--region", "east", "--csv"),
       "section,key,amount\nregion,east,1.00\nproduct,bolt,0.30\nproduct,nut,0.70\ntotal,,1.00\n",
       "--region east --csv")
    tests_green()


@check("usage")
def _():
    for args in ([], ["sales.csv", "--bogus"], ["sales.csv", "--top"], ["sales.csv", "--top", "x"],
                 ["sales.csv", "--top", "0"], ["sales.csv", "--region"], ["--csv"]):
        r = py("report.py", *args)
        eq(r.returncode, 2, f"report.py {' '.join(args)}: exit code")
        eq(r.stderr, USAGE, f"report.py {' '.join(args)}: stderr")
        eq(r.stdout, "", f"report.py {' '.join(args)}: stdout")
    tests_green()
PY
