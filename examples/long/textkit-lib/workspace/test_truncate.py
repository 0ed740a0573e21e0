import unittest

from textkit import truncate


class TestTruncate(unittest.TestCase):
    def test_short_text_unchanged(self):
        self.assertEqual(truncate("hi", 5), "hi")

    def test_long_text_cut_with_dots(self):
        self.assertEqual(truncate("hello world", 8), "hello...")

    def test_too_small_limit(self):
        with self.assertRaises(ValueError):
            truncate("hello", 2)


if __name__ == "__main__":
    unittest.main()
