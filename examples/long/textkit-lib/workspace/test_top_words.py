import unittest

from textkit import top_words


class TestTopWords(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_ties_in_alphabetical_order(self):
        self.assertEqual(top_words("pear apple fig", 2), [("apple", 1), ("fig", 1)])


if __name__ == "__main__":
    unittest.main()
