"""report.py: a sales report from a CSV file (date,region,product,units,price in cents).

Usage: python3 report.py FILE
"""
import sys


def load(path):
    rows = []
    with open(path) as f:
        header = f.readline().strip().split(",")
        for line in f:
            line = line.strip()
            if not line:
                continue
            values = line.split(",")
            row = dict(zip(header, values))
            row["units"] = int(row["units"])
            row["price"] = int(row["price"])
            rows.append(row)
    return rows


def revenue(row):
    return row["units"] * row["price"]


def region_totals(rows):
    totals = {}
    for row in rows:
        totals[row["region"]] = totals.get(row["region"], 0) + row["units"] * row["price"]
    return totals


def product_totals(rows):
    totals = {}
    for row in rows:
        totals[row["product"]] = totals.get(row["product"], 0) + row["units"] * row["price"]
    return totals


def money(cents):
    return "%d.%02d" % (cents // 100, cents % 100)


def render(title, totals):
    lines = [title]
    for key in sorted(totals):
        lines.append("  %-10s %10s" % (key, money(totals[key])))
    return lines


def main(argv):
    if len(argv) != 2:
        print("usage: report.py FILE", file=sys.stderr)
        return 2
    rows = load(argv[1])
    lines = []
    lines += render("By region", region_totals(rows))
    lines += render("By product", product_totals(rows))
    total = 0
    for row in rows:
        total += row["units"] * row["price"]
    lines.append("Total %s" % money(total))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
