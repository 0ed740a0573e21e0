import unittest

from orders import apply_coupon, line_total, order_total, receipt


class TestLineTotal(unittest.TestCase):
    def test_exact_cents(self):
        self.assertEqual(line_total("0.29", 3), 87)
        self.assertEqual(line_total("0.50", 4), 200)


class TestApplyCoupon(unittest.TestCase):
    def test_discount_rounded(self):
        self.assertEqual(apply_coupon(1001, 10), 901)
        self.assertEqual(apply_coupon(250, 10), 225)


class TestOrderTotal(unittest.TestCase):
    def test_takes_stock(self):
        stock = {"pen": 5, "ink": 2}
        total = order_total([("pen", "1.50", 2), ("ink", "4.00", 1)], stock)
        self.assertEqual(total, 700)
        self.assertEqual(stock, {"pen": 3, "ink": 1})


class TestReceipt(unittest.TestCase):
    def test_lines_and_total(self):
        lines = [("pen", "1.15", 2), ("ink", "0.50", 1)]
        self.assertEqual(receipt(lines), ["pen x2 2.30", "ink x1 0.50", "TOTAL 2.80"])


if __name__ == "__main__":
    unittest.main()
