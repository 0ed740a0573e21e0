"""The ten tests the refactor keeps green: python3 -m unittest test_report"""
import subprocess
import sys
import unittest

import report

EXPECTED = """By region
  east            25.00
  north           41.49
  south           22.00
By product
  gadget          36.00
  gizmo            9.99
  widget          42.50
Total 88.49
"""


class TestReport(unittest.TestCase):
    def setUp(self):
        self.rows = report.load("sales.csv")

    def test_load_skips_blank_lines(self):
        self.assertEqual(len(self.rows), 6)

    def test_load_types(self):
        self.assertEqual(
            self.rows[0],
            {"date": "2026-01-02", "region": "north", "product": "widget", "units": 3, "price": 250},
        )

    def test_revenue(self):
        self.assertEqual(report.revenue(self.rows[3]), 2500)

    def test_region_totals(self):
        self.assertEqual(report.region_totals(self.rows), {"north": 4149, "south": 2200, "east": 2500})

    def test_product_totals(self):
        self.assertEqual(report.product_totals(self.rows), {"widget": 4250, "gadget": 3600, "gizmo": 999})

    def test_money(self):
        self.assertEqual(report.money(8849), "88.49")

    def test_money_cents_padded(self):
        self.assertEqual(report.money(5), "0.05")

    def test_render_sorted(self):
        self.assertEqual(
            report.render("T", {"b": 100, "a": 5}),
            ["T", "  a                0.05", "  b                1.00"],
        )

    def test_main_output(self):
        out = subprocess.run([sys.executable, "report.py", "sales.csv"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        self.assertEqual(out.stdout, EXPECTED)

    def test_usage(self):
        out = subprocess.run([sys.executable, "report.py"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 2)
        self.assertTrue(out.stderr.startswith("usage:"), out.stderr)


if __name__ == "__main__":
    unittest.main()
