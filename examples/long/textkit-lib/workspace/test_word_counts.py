import unittest

from textkit import word_counts


class TestWordCounts(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(word_counts("the cat and the hat"), {"the": 2, "cat": 1, "and": 1, "hat": 1})

    def test_case_is_ignored(self):
        self.assertEqual(word_counts("Go go GO"), {"go": 3})


if __name__ == "__main__":
    unittest.main()
