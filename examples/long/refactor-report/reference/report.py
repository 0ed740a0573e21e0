"""report.py: a sales report from a CSV file (date,region,product,units,price in cents).

Usage: python3 report.py FILE [--region NAME] [--top N] [--csv]
"""
import sys

from fmt import money, render
from salesdata import load, revenue, total_by

USAGE = "usage: report.py FILE [--region NAME] [--top N] [--csv]"


def region_totals(rows):
    return total_by(rows, "region")


def product_totals(rows):
    return total_by(rows, "product")


def top_products(rows, n):
    ranked = sorted(product_totals(rows).items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[:n]


def build_report(rows, top=None):
    lines = render("By region", region_totals(rows))
    if top is None:
        lines += render("By product", product_totals(rows))
    else:
        lines.append("By product")
        lines += ["  %-10s %10s" % (key, money(cents)) for key, cents in top_products(rows, top)]
    lines.append("Total %s" % money(sum(revenue(row) for row in rows)))
    return lines


def build_csv(rows):
    lines = ["section,key,amount"]
    for section, totals in (("region", region_totals(rows)), ("product", product_totals(rows))):
        lines += ["%s,%s,%s" % (section, key, money(totals[key])) for key in sorted(totals)]
    lines.append("total,,%s" % money(sum(revenue(row) for row in rows)))
    return lines


def parse_args(args):
    """FILE and the options as a dict, or None when they do not parse."""
    if not args or args[0].startswith("--"):
        return None
    opts = {"file": args[0], "region": None, "top": None, "csv": False}
    rest = args[1:]
    while rest:
        flag = rest.pop(0)
        if flag == "--csv":
            opts["csv"] = True
        elif flag in ("--region", "--top") and rest:
            value = rest.pop(0)
            if flag == "--region":
                opts["region"] = value
            elif value.isdigit() and int(value) > 0:
                opts["top"] = int(value)
            else:
                return None
        else:
            return None
    return opts


def main(argv):
    opts = parse_args(argv[1:])
    if opts is None:
        print(USAGE, file=sys.stderr)
        return 2
    rows = load(opts["file"])
    if opts["region"] is not None:
        rows = [row for row in rows if row["region"] == opts["region"]]
    if opts["csv"]:
        lines = build_csv(rows)
    else:
        lines = build_report(rows, opts["top"])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
