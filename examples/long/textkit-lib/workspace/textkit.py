"""textkit: small text helpers, grown one function at a time.

Each function has its own test file, test_<function>.py: `python3 -m unittest test_slugify`.
Python 3 standard library only.
"""
