import unittest

from money import format_cents, split_evenly, to_cents


class TestToCents(unittest.TestCase):
    def test_whole_and_fractional(self):
        self.assertEqual(to_cents("3"), 300)
        self.assertEqual(to_cents("12.5"), 1250)

    def test_no_float_error(self):
        self.assertEqual(to_cents("1.15"), 115)
        self.assertEqual(to_cents("19.99"), 1999)


class TestFormatCents(unittest.TestCase):
    def test_two_places(self):
        self.assertEqual(format_cents(1250), "12.50")
        self.assertEqual(format_cents(7), "0.07")
        self.assertEqual(format_cents(1205), "12.05")

    def test_negative(self):
        self.assertEqual(format_cents(-5), "-0.05")
        self.assertEqual(format_cents(-1250), "-12.50")


class TestSplitEvenly(unittest.TestCase):
    def test_remainder_goes_first(self):
        self.assertEqual(split_evenly(100, 3), [34, 33, 33])

    def test_even_split(self):
        self.assertEqual(split_evenly(90, 3), [30, 30, 30])


if __name__ == "__main__":
    unittest.main()
