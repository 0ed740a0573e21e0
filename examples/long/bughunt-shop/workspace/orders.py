"""orders: order lines (sku, unit price as text, qty), priced with money, taken from inventory."""
from inventory import remove_stock
from money import format_cents, to_cents


def line_total(price_text, qty):
    """The price of qty units at price_text each, in cents: line_total('0.29', 3) == 87."""
    return int(float(price_text) * qty * 100)


def apply_coupon(total_cents, percent):
    """total_cents less percent % of it; the discount is rounded to the nearest cent, halves up
    (10% off 1005 is 1005 - 101 = 904)."""
    return int(total_cents * (1 - percent / 100))


def order_total(lines, stock, coupon=0):
    """Take every line's units out of stock and return the order's total in cents after the
    coupon. When any line lacks stock, raise ValueError and leave stock unchanged."""
    total = 0
    for sku, price_text, qty in lines:
        if stock.get(sku, 0) < qty:
            raise ValueError(f"not enough {sku}")
        total += line_total(price_text, qty)
    return apply_coupon(total, coupon)


def receipt(lines):
    """One text line per order line, 'SKU xQTY AMOUNT', then 'TOTAL AMOUNT' (the sum of the
    lines), amounts formatted by format_cents."""
    out = []
    total = 0
    for sku, price_text, qty in lines:
        amount = line_total(price_text, qty)
        out.append(f"{sku} x{qty} {format_cents(amount)}")
    for sku, price_text, qty in lines[:-1]:
        total += line_total(price_text, qty)
    out.append(f"TOTAL {format_cents(total)}")
    return out
