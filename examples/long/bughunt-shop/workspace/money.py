"""money: amounts of money as integer cents."""


def to_cents(text):
    """'12.5' -> 1250, '3' -> 300, '0.07' -> 7: a decimal amount of money as integer cents."""
    return int(float(text) * 100)


def format_cents(cents):
    """1250 -> '12.50', 7 -> '0.07', -5 -> '-0.05': cents as a decimal amount with two places."""
    return f"{cents // 100}.{cents % 100}"


def split_evenly(cents, n):
    """Split cents into n integer parts that add up to cents; the first cents % n parts are one
    cent larger than the others."""
    return [cents // n] * n
