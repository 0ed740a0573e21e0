"""ledger.py: an expense ledger kept in a CSV file whose header is date,category,amount.

Usage: python3 ledger.py FILE COMMAND [ARGS...]

Each command is a function cmd_NAME(path, rows, args) registered in COMMANDS under its name:
path is FILE, rows is load(FILE), args is the list of the command's own arguments. It prints
its result to stdout and returns the exit code (None means 0).
"""
import csv
import os
import sys

USAGE = "usage: ledger.py FILE COMMAND [ARGS...]"


def load(path):
    """The rows of the ledger at path, in file order, as dicts with the keys date and category
    (strings) and amount (an int)."""
    with open(path, newline="") as f:
        return [
            {"date": r["date"], "category": r["category"], "amount": int(r["amount"])}
            for r in csv.DictReader(f)
        ]


def cmd_count(path, rows, args):
    print(len(rows))


def cmd_total(path, rows, args):
    if args:
        rows = [r for r in rows if r["category"] == args[0]]
    print(sum(r["amount"] for r in rows))


def cmd_categories(path, rows, args):
    for name in sorted({r["category"] for r in rows}):
        print(name)


def cmd_month(path, rows, args):
    print(sum(r["amount"] for r in rows if r["date"][:7] == args[0]))


def cmd_top(path, rows, args):
    ranked = sorted(rows, key=lambda r: -r["amount"])
    for r in ranked[: int(args[0])]:
        print(r["date"], r["category"], r["amount"])


def cmd_add(path, rows, args):
    date, category, amount = args
    try:
        int(amount)
    except ValueError:
        print("error: amount must be an integer", file=sys.stderr)
        return 2
    with open(path, "a") as f:
        f.write(f"{date},{category},{amount}\n")
    print("added")


COMMANDS = {
    "count": cmd_count,
    "total": cmd_total,
    "categories": cmd_categories,
    "month": cmd_month,
    "top": cmd_top,
    "add": cmd_add,
}


def main(argv):
    if len(argv) < 3:
        print(USAGE, file=sys.stderr)
        return 2
    path, command, args = argv[1], argv[2], argv[3:]
    if not os.path.exists(path):
        print(f"error: no such file {path}", file=sys.stderr)
        return 1
    if command not in COMMANDS:
        print(f"error: unknown command {command}", file=sys.stderr)
        return 2
    rows = load(path)
    return COMMANDS[command](path, rows, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
