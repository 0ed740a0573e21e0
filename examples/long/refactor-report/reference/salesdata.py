"""salesdata: loading sales rows and totalling their revenue."""


def load(path):
    rows = []
    with open(path) as f:
        header = f.readline().strip().split(",")
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = dict(zip(header, line.split(",")))
            row["units"] = int(row["units"])
            row["price"] = int(row["price"])
            rows.append(row)
    return rows


def revenue(row):
    return row["units"] * row["price"]


def total_by(rows, key):
    totals = {}
    for row in rows:
        totals[row[key]] = totals.get(row[key], 0) + revenue(row)
    return totals
