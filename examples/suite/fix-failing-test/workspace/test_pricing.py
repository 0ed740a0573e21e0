import unittest

from pricing import apply_discount


class ApplyDiscountTest(unittest.TestCase):
    def test_ten_percent(self):
        self.assertEqual(apply_discount(200, 10), 180.0)

    def test_zero_percent(self):
        self.assertEqual(apply_discount(50, 0), 50.0)

    def test_rounding(self):
        self.assertEqual(apply_discount(19.99, 15), 16.99)


if __name__ == "__main__":
    unittest.main()
