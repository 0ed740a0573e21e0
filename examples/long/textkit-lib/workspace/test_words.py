import unittest

from textkit import words


class TestWords(unittest.TestCase):
    def test_lowercased_words(self):
        self.assertEqual(words("Don't stop, DON'T"), ["don't", "stop", "don't"])

    def test_digits_are_word_characters(self):
        self.assertEqual(words("route 66!"), ["route", "66"])


if __name__ == "__main__":
    unittest.main()
