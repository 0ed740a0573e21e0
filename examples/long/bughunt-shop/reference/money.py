"""money: amounts of money as integer cents."""


def to_cents(text):
    """'12.5' -> 1250, '3' -> 300, '0.07' -> 7: a decimal amount of money as integer cents."""
    whole, _, frac = text.strip().partition(".")
    sign = -1 if whole.startswith("-") else 1
    whole = whole.lstrip("+-") or "0"
    return sign * (int(whole) * 100 + int((frac + "00")[:2]))


def format_cents(cents):
    """1250 -> '12.50', 7 -> '0.07', -5 -> '-0.05': cents as a decimal amount with two places."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def split_evenly(cents, n):
    """Split cents into n integer parts that add up to cents; the first cents % n parts are one
    cent larger than the others."""
    base, extra = divmod(cents, n)
    return [base + 1 if i < extra else base for i in range(n)]
