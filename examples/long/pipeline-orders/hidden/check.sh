# Hidden checks of examples/long/pipeline-orders: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/pipeline-orders/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
# Other input data (hidden/in): each stage runs on its own, on the exact files the stages
# before it should have written, so a criterion measures its own stage only ("all" runs them all).
import json

ORDERS_IN = """order_id,customer_id,date,product,qty,unit_price
2001,k1,2026-04-02,tea,2,3
 2002 ,k2,2026-04-01,cake,1,1.5
  ,  ,  ,  ,  ,  

2003,k1,2026-04-02,tea,1,2.999
2004,k3,2026-04-01,jam,4,0.25
2002,k2,2026-04-01,cake,9,9.99
2005,k2,2026-04-03,bun,-1,0.80
2006,k9,2026-04-03,bun,3,0.80
2007,k3,2026-04-03,cake,x,y
2008,k1,2026-04-01,jam,1,0.25
2003,k1,2026-04-02,tea,1,3.00
2009,k2,2026-04-04,soda,2,1.25
2010,k4,2026-04-04,cake,2,2.00
2011,k1,2026-04-04,jam,12,.5
2012,k1,2026-04-04,jam,1.0,0.5
"""
CUSTOMERS_IN = """customer_id,name,country
k1,Mia,SE
k2,Olu,NG
k3,Ana,SE
k4,Leo,AR
"""
EXPECTED = {
    "clean.csv": """order_id,customer_id,date,product,qty,unit_price
2001,k1,2026-04-02,tea,2,3
2002,k2,2026-04-01,cake,1,1.5
2003,k1,2026-04-02,tea,1,2.999
2004,k3,2026-04-01,jam,4,0.25
2002,k2,2026-04-01,cake,9,9.99
2005,k2,2026-04-03,bun,-1,0.80
2006,k9,2026-04-03,bun,3,0.80
2007,k3,2026-04-03,cake,x,y
2008,k1,2026-04-01,jam,1,0.25
2003,k1,2026-04-02,tea,1,3.00
2009,k2,2026-04-04,soda,2,1.25
2010,k4,2026-04-04,cake,2,2.00
2011,k1,2026-04-04,jam,12,.5
2012,k1,2026-04-04,jam,1.0,0.5
""",
    "valid.csv": """order_id,customer_id,date,product,qty,unit_price
2001,k1,2026-04-02,tea,2,3
2002,k2,2026-04-01,cake,1,1.5
2004,k3,2026-04-01,jam,4,0.25
2002,k2,2026-04-01,cake,9,9.99
2006,k9,2026-04-03,bun,3,0.80
2008,k1,2026-04-01,jam,1,0.25
2003,k1,2026-04-02,tea,1,3.00
2009,k2,2026-04-04,soda,2,1.25
2010,k4,2026-04-04,cake,2,2.00
""",
    "rejects.csv": """order_id,customer_id,date,product,qty,unit_price,reason
2003,k1,2026-04-02,tea,1,2.999,bad price
2005,k2,2026-04-03,bun,-1,0.80,bad qty
2007,k3,2026-04-03,cake,x,y,bad qty
2011,k1,2026-04-04,jam,12,.5,bad price
2012,k1,2026-04-04,jam,1.0,0.5,bad qty
""",
    "orders.csv": """order_id,customer_id,date,product,qty,unit_price
2001,k1,2026-04-02,tea,2,3
2002,k2,2026-04-01,cake,1,1.5
2004,k3,2026-04-01,jam,4,0.25
2006,k9,2026-04-03,bun,3,0.80
2008,k1,2026-04-01,jam,1,0.25
2003,k1,2026-04-02,tea,1,3.00
2009,k2,2026-04-04,soda,2,1.25
2010,k4,2026-04-04,cake,2,2.00
""",
    "joined.csv": """order_id,date,customer,country,product,qty,amount
2001,2026-04-02,Mia,SE,tea,2,6.00
2002,2026-04-01,Olu,NG,cake,1,1.50
2004,2026-04-01,Ana,SE,jam,4,1.00
2006,2026-04-03,unknown,unknown,bun,3,2.40
2008,2026-04-01,Mia,SE,jam,1,0.25
2003,2026-04-02,Mia,SE,tea,1,3.00
2009,2026-04-04,Olu,NG,soda,2,2.50
2010,2026-04-04,Leo,AR,cake,2,4.00
""",
    "daily.csv": """date,orders,amount
2026-04-01,3,2.75
2026-04-02,2,9.00
2026-04-03,1,2.40
2026-04-04,2,6.50
""",
    "countries.csv": """country,orders,amount
SE,4,10.25
AR,1,4.00
NG,2,4.00
unknown,1,2.40
""",
    "products.csv": """product,qty,amount
jam,5,1.25
bun,3,2.40
cake,3,5.50
""",
    "summary.json": """{
  "customers": 5,
  "orders": 8,
  "rejected": 5,
  "revenue": "20.65"
}
""",
}


def setup(*files):
    """hidden/in with the other input data; hidden/out with the given earlier outputs."""
    os.makedirs("hidden/in", exist_ok=True)
    os.makedirs("hidden/out", exist_ok=True)
    write("hidden/in/orders.csv", ORDERS_IN)
    write("hidden/in/customers.csv", CUSTOMERS_IN)
    for name in files:
        write("hidden/out/" + name, EXPECTED[name])


def stage(name, output="hidden/out"):
    r = py("pipeline.py", name, "--input", "hidden/in", "--output", output)
    if r.returncode != 0:
        raise AssertionError(f"pipeline.py {name} exits {r.returncode}: "
                             + " | ".join(r.stderr.strip().splitlines()[-1:]))


def same(name, output="hidden/out"):
    path = os.path.join(output, name)
    if not os.path.exists(path):
        raise AssertionError(f"{path} was not written")
    with open(path, newline="") as f:
        eq(f.read(), EXPECTED[name], path)


@check("strip")
def _():
    setup()
    stage("clean")
    if not os.path.exists("hidden/out/clean.csv"):
        raise AssertionError("hidden/out/clean.csv was not written")
    with open("hidden/out/clean.csv", newline="") as f:
        lines = [line for line in f.read().split("\n") if line.strip(",")]
    eq(lines, [line for line in EXPECTED["clean.csv"].split("\n") if line],
       "hidden/out/clean.csv without its empty rows")


@check("clean")
def _():
    setup()
    stage("clean")
    same("clean.csv")


@check("valid")
def _():
    setup("clean.csv")
    stage("valid")
    same("valid.csv")


@check("rejects")
def _():
    setup("clean.csv")
    stage("rejects")
    same("rejects.csv")


@check("dedupe")
def _():
    setup("valid.csv")
    stage("dedupe")
    same("orders.csv")


@check("join")
def _():
    setup("orders.csv")
    stage("join")
    same("joined.csv")


@check("daily")
def _():
    setup("joined.csv")
    stage("daily")
    same("daily.csv")


@check("countries")
def _():
    setup("joined.csv")
    stage("countries")
    same("countries.csv")


@check("products")
def _():
    setup("joined.csv")
    stage("products")
    same("products.csv")


@check("summary")
def _():
    setup("joined.csv", "rejects.csv")
    stage("summary")
    same("summary.json")
    with open("hidden/out/summary.json") as f:
        eq(sorted(json.load(f)), ["customers", "orders", "rejected", "revenue"], "summary keys")


@check("all")
def _():
    setup()
    stage("all", output="hidden/fresh")
    for name in EXPECTED:
        same(name, output="hidden/fresh")
PY
