import unittest

from inventory import add_stock, low_stock, remove_stock


class TestAddStock(unittest.TestCase):
    def test_adds_to_what_is_there(self):
        stock = {}
        add_stock(stock, "pen", 5)
        add_stock(stock, "pen", 3)
        self.assertEqual(stock, {"pen": 8})


class TestRemoveStock(unittest.TestCase):
    def test_remove_some(self):
        stock = {"pen": 5}
        remove_stock(stock, "pen", 2)
        self.assertEqual(stock, {"pen": 3})

    def test_remove_all(self):
        stock = {"pen": 5}
        remove_stock(stock, "pen", 5)
        self.assertEqual(stock, {"pen": 0})


class TestLowStock(unittest.TestCase):
    def test_sorted_by_name(self):
        self.assertEqual(low_stock({"pen": 5, "ink": 1, "cap": 0}, 2), ["cap", "ink"])


if __name__ == "__main__":
    unittest.main()
