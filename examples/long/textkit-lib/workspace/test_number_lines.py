import unittest

from textkit import number_lines


class TestNumberLines(unittest.TestCase):
    def test_two_lines(self):
        self.assertEqual(number_lines(["a", "b"]), ["1: a", "2: b"])

    def test_numbers_right_aligned(self):
        got = number_lines(["x"] * 10)
        self.assertEqual(got[0], " 1: x")
        self.assertEqual(got[9], "10: x")


if __name__ == "__main__":
    unittest.main()
