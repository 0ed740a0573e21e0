"""pipeline.py: turns data/orders.csv and data/customers.csv into report files under out/.

Usage: python3 pipeline.py STAGE [--input DIR] [--output DIR]

DIR defaults: --input data, --output out. Each stage is a function stage_NAME(indir, outdir)
registered in STAGES under its name; it reads the input directory and/or the files earlier
stages wrote to the output directory, and writes one file there. Use read_csv and write_csv:
they keep the files' exact format (comma-separated, lines ending in a bare newline).
"""
import csv
import os
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


def stage_clean(indir, outdir):
    raise NotImplementedError("stage_clean")


def stage_valid(indir, outdir):
    raise NotImplementedError("stage_valid")


def stage_rejects(indir, outdir):
    raise NotImplementedError("stage_rejects")


def stage_dedupe(indir, outdir):
    raise NotImplementedError("stage_dedupe")


def stage_join(indir, outdir):
    raise NotImplementedError("stage_join")


def stage_daily(indir, outdir):
    raise NotImplementedError("stage_daily")


def stage_countries(indir, outdir):
    raise NotImplementedError("stage_countries")


def stage_products(indir, outdir):
    raise NotImplementedError("stage_products")


def stage_summary(indir, outdir):
    raise NotImplementedError("stage_summary")


def stage_all(indir, outdir):
    raise NotImplementedError("stage_all")


STAGES = {
    "clean": stage_clean,
    "valid": stage_valid,
    "rejects": stage_rejects,
    "dedupe": stage_dedupe,
    "join": stage_join,
    "daily": stage_daily,
    "countries": stage_countries,
    "products": stage_products,
    "summary": stage_summary,
    "all": stage_all,
}


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
