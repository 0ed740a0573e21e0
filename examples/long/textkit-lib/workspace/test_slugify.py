import unittest

from textkit import slugify


class TestSlugify(unittest.TestCase):
    def test_words_joined_by_hyphens(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_accents_and_punctuation(self):
        self.assertEqual(slugify("Héllo, Wörld"), "hello-world")


if __name__ == "__main__":
    unittest.main()
