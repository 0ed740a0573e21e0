import unittest

from textkit import strip_accents


class TestStripAccents(unittest.TestCase):
    def test_accented_letters(self):
        self.assertEqual(strip_accents("Café"), "Cafe")
        self.assertEqual(strip_accents("naïve"), "naive")

    def test_plain_text_unchanged(self):
        self.assertEqual(strip_accents("plain text"), "plain text")


if __name__ == "__main__":
    unittest.main()
