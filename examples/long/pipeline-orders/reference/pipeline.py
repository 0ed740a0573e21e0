"""pipeline.py: turns data/orders.csv and data/customers.csv into report files under out/.

Usage: python3 pipeline.py STAGE [--input DIR] [--output DIR]

DIR defaults: --input data, --output out. Each stage is a function stage_NAME(indir, outdir)
registered in STAGES under its name; it reads the input directory and/or the files earlier
stages wrote to the output directory, and writes one file there. Use read_csv and write_csv:
they keep the files' exact format (comma-separated, lines ending in a bare newline).
"""
import csv
import json
import os
import re
import sys


def read_csv(path):
    """(header, rows) of a CSV file: the header as a list of names, each row as a list."""
    with open(path, newline="") as f:
        lines = list(csv.reader(f))
    return lines[0], lines[1:]


def write_csv(path, header, rows):
    """Write header and rows (lists of values) as CSV, lines ending in a bare newline."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def cents(text):
    """'2.25' -> 225, '3' -> 300, '1.5' -> 150."""
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def money(c):
    return "%d.%02d" % (c // 100, c % 100)


def stage_clean(indir, outdir):
    header, rows = read_csv(os.path.join(indir, "orders.csv"))
    kept = []
    for row in rows:
        row = [v.strip() for v in row]
        if any(row):
            kept.append(row)
    write_csv(os.path.join(outdir, "clean.csv"), header, kept)


def problem(row):
    """Why valid drops a row of clean.csv, or None."""
    qty, price = row[4], row[5]
    if not (qty.isdigit() and int(qty) >= 1):
        return "bad qty"
    if not re.fullmatch(r"[0-9]+(\.[0-9]{1,2})?", price):
        return "bad price"
    return None


def stage_valid(indir, outdir):
    header, rows = read_csv(os.path.join(outdir, "clean.csv"))
    write_csv(os.path.join(outdir, "valid.csv"), header, [r for r in rows if problem(r) is None])


def stage_rejects(indir, outdir):
    header, rows = read_csv(os.path.join(outdir, "clean.csv"))
    bad = [r + [problem(r)] for r in rows if problem(r) is not None]
    write_csv(os.path.join(outdir, "rejects.csv"), header + ["reason"], bad)


def stage_dedupe(indir, outdir):
    header, rows = read_csv(os.path.join(outdir, "valid.csv"))
    seen, kept = set(), []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            kept.append(row)
    write_csv(os.path.join(outdir, "orders.csv"), header, kept)


def stage_join(indir, outdir):
    _, customers = read_csv(os.path.join(indir, "customers.csv"))
    who = {c[0]: (c[1], c[2]) for c in customers}
    _, rows = read_csv(os.path.join(outdir, "orders.csv"))
    out = []
    for order_id, customer_id, date, product, qty, price in rows:
        name, country = who.get(customer_id, ("unknown", "unknown"))
        out.append([order_id, date, name, country, product, qty, money(int(qty) * cents(price))])
    header = ["order_id", "date", "customer", "country", "product", "qty", "amount"]
    write_csv(os.path.join(outdir, "joined.csv"), header, out)


def joined(outdir):
    """The rows of joined.csv as dicts, amount in cents."""
    header, rows = read_csv(os.path.join(outdir, "joined.csv"))
    out = [dict(zip(header, r)) for r in rows]
    for r in out:
        r["amount"] = cents(r["amount"])
    return out


def group(rows, key):
    """{value of key: [orders, cents, units]}"""
    totals = {}
    for r in rows:
        t = totals.setdefault(r[key], [0, 0, 0])
        t[0] += 1
        t[1] += r["amount"]
        t[2] += int(r["qty"])
    return totals


def stage_daily(indir, outdir):
    totals = group(joined(outdir), "date")
    rows = [[d, t[0], money(t[1])] for d, t in sorted(totals.items())]
    write_csv(os.path.join(outdir, "daily.csv"), ["date", "orders", "amount"], rows)


def stage_countries(indir, outdir):
    totals = group(joined(outdir), "country")
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))
    rows = [[c, t[0], money(t[1])] for c, t in ranked]
    write_csv(os.path.join(outdir, "countries.csv"), ["country", "orders", "amount"], rows)


def stage_products(indir, outdir):
    totals = group(joined(outdir), "product")
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][2], kv[0]))[:3]
    rows = [[p, t[2], money(t[1])] for p, t in ranked]
    write_csv(os.path.join(outdir, "products.csv"), ["product", "qty", "amount"], rows)


def stage_summary(indir, outdir):
    rows = joined(outdir)
    _, rejected = read_csv(os.path.join(outdir, "rejects.csv"))
    summary = {
        "customers": len({r["customer"] for r in rows}),
        "orders": len(rows),
        "rejected": len(rejected),
        "revenue": money(sum(r["amount"] for r in rows)),
    }
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        f.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")


ORDER = ["clean", "valid", "rejects", "dedupe", "join", "daily", "countries", "products", "summary"]


def stage_all(indir, outdir):
    for name in ORDER:
        STAGES[name](indir, outdir)


STAGES = {name: globals()["stage_" + name] for name in ORDER + ["all"]}


def main(argv):
    args = argv[1:]
    opts = {"--input": "data", "--output": "out"}
    stage = None
    while args:
        arg = args.pop(0)
        if arg in opts and args:
            opts[arg] = args.pop(0)
        elif stage is None and not arg.startswith("-"):
            stage = arg
        else:
            stage = None
            break
    if stage not in STAGES:
        print("usage: pipeline.py STAGE [--input DIR] [--output DIR]; stages: "
              + ", ".join(STAGES), file=sys.stderr)
        return 2
    os.makedirs(opts["--output"], exist_ok=True)
    return STAGES[stage](opts["--input"], opts["--output"])


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
