import unittest

from textkit import wrap


class TestWrap(unittest.TestCase):
    def test_greedy_lines(self):
        self.assertEqual(wrap("the quick brown fox", 10), ["the quick", "brown fox"])

    def test_one_line_when_it_fits(self):
        self.assertEqual(wrap("a b c", 10), ["a b c"])


if __name__ == "__main__":
    unittest.main()
