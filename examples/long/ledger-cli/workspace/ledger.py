"""ledger.py: an expense ledger kept in a CSV file whose header is date,category,amount.

Usage: python3 ledger.py FILE COMMAND [ARGS...]

Each command is a function cmd_NAME(path, rows, args) registered in COMMANDS under its name:
path is FILE, rows is load(FILE), args is the list of the command's own arguments. It prints
its result to stdout and returns the exit code (None means 0).
"""
import csv
import sys


def load(path):
    """The rows of the ledger at path, in file order, as dicts with the keys date and category
    (strings) and amount (an int)."""
    raise NotImplementedError("load")


def cmd_count(path, rows, args):
    raise NotImplementedError("cmd_count")


def cmd_total(path, rows, args):
    raise NotImplementedError("cmd_total")


def cmd_categories(path, rows, args):
    raise NotImplementedError("cmd_categories")


def cmd_month(path, rows, args):
    raise NotImplementedError("cmd_month")


def cmd_top(path, rows, args):
    raise NotImplementedError("cmd_top")


def cmd_add(path, rows, args):
    raise NotImplementedError("cmd_add")


COMMANDS = {
    "count": cmd_count,
    "total": cmd_total,
    "categories": cmd_categories,
    "month": cmd_month,
    "top": cmd_top,
    "add": cmd_add,
}


def main(argv):
    path, command, args = argv[1], argv[2], argv[3:]
    rows = load(path)
    return COMMANDS[command](path, rows, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
