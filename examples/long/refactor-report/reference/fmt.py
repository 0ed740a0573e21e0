"""fmt: the report's text layout."""


def money(cents):
    return "%d.%02d" % (cents // 100, cents % 100)


def render(title, totals):
    lines = [title]
    for key in sorted(totals):
        lines.append("  %-10s %10s" % (key, money(totals[key])))
    return lines
