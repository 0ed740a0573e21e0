"""textkit: small text helpers, grown one function at a time.

Each function has its own test file, test_<function>.py: `python3 -m unittest test_slugify`.
Python 3 standard library only.
"""
import re
import unicodedata
from collections import Counter


def strip_accents(s):
    decomposed = unicodedata.normalize("NFKD", s)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def slugify(s):
    return '-'.join(re.findall('[a-z0-9]+', strip_accents(s).lower()))


def words(s):
    return ''.join(c if c.isalnum() or c == chr(39) else ' ' for c in s.lower()).split()


def word_counts(s):
    return dict(Counter(words(s)))


def top_words(s, n):
    return sorted(word_counts(s).items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def truncate(s, n):
    if n < 3:
        raise ValueError("n must be at least 3")
    if len(s) <= n:
        return s
    return s[: n - 3] + "..."


def wrap(s, width):
    lines, current = [], ""
    for word in s.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def number_lines(lines):
    width = len(str(len(lines)))
    return [f"{i:>{width}}: {line}" for i, line in enumerate(lines, start=1)]


def camel_to_snake(s):
    out = ""
    for i, c in enumerate(s):
        if c.isupper() and i > 0:
            out += "_"
        out += c.lower()
    return out


def snake_to_camel(s):
    parts = [p.lower() for p in s.split("_") if p]
    if not parts:
        return ""
    return parts[0] + "".join(p[0].upper() + p[1:] for p in parts[1:])
