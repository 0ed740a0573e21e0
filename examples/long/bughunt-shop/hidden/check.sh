# Hidden checks of examples/long/bughunt-shop: kept by the bench, never uploaded, never shown to any role.
# Convention (examples/long/README.md): run by its path (`sh examples/long/bughunt-shop/hidden/check.sh`)
# in a scratch copy of a snapshot; prints one `PASS <id>` or `FAIL <id>` line per goal clause, in
# the goal's order (the ids of the task's [[acceptance]] entries), each criterion in its own fresh
# copy; exits 0 only if all pass. LONG_HIDDEN_VERBOSE=1 adds each failure's reason on stderr.
# The helpers (`check`, `run`, `py`, `write`, `read`, `eq`) and the runner are the shared
# harness, examples/long/lib/hidden_harness.py.
. "$(dirname "$0")/../../lib/hidden-harness.sh"
run_hidden_criteria <<'PY'
# ---- the hidden criteria, one per goal clause, in the goal's order ----
def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return
    except Exception as other:
        raise AssertionError(f"{fn.__name__}{args!r} raised {type(other).__name__}, not {exc.__name__}")
    raise AssertionError(f"{fn.__name__}{args!r} did not raise {exc.__name__}")


@check("to-cents")
def _():
    from money import to_cents
    for text, want in [("0.07", 7), ("100", 10000), ("2.5", 250), ("0.1", 10), ("4.35", 435),
                       ("9.95", 995), ("0.57", 57), ("8.20", 820), ("0", 0)]:
        eq(to_cents(text), want, f"to_cents({text!r})")
    eq(type(to_cents("1.15")), int, "type")


@check("format-cents")
def _():
    from money import format_cents
    for cents, want in [(-5, "-0.05"), (-1250, "-12.50"), (0, "0.00"), (100, "1.00"),
                        (123456, "1234.56"), (9, "0.09"), (-100, "-1.00")]:
        eq(format_cents(cents), want, f"format_cents({cents})")


@check("split-evenly")
def _():
    from money import split_evenly
    eq(split_evenly(101, 4), [26, 25, 25, 25], "split_evenly(101, 4)")
    eq(split_evenly(2, 3), [1, 1, 0], "split_evenly(2, 3)")
    eq(split_evenly(0, 2), [0, 0], "split_evenly(0, 2)")
    eq(split_evenly(7, 1), [7], "split_evenly(7, 1)")
    eq(sum(split_evenly(12345, 7)), 12345, "the parts add up")


@check("add-stock")
def _():
    from inventory import add_stock
    stock = {"ink": 2}
    add_stock(stock, "pen", 4)
    eq(stock, {"ink": 2, "pen": 4}, "a new SKU")
    add_stock(stock, "ink", 0)
    add_stock(stock, "ink", 5)
    eq(stock, {"ink": 7, "pen": 4}, "adds to what is there")


@check("remove-stock")
def _():
    from inventory import remove_stock
    stock = {"pen": 3, "ink": 1}
    raises(ValueError, remove_stock, stock, "pen", 4)
    eq(stock, {"pen": 3, "ink": 1}, "stock after asking for too much")
    raises(ValueError, remove_stock, stock, "cap", 1)
    eq(stock, {"pen": 3, "ink": 1}, "stock after asking for an unknown SKU")
    remove_stock(stock, "ink", 1)
    remove_stock(stock, "pen", 1)
    eq(stock, {"pen": 2, "ink": 0}, "stock after two removals")


@check("low-stock")
def _():
    from inventory import low_stock
    stock = {"zip": 0, "cap": 3, "ant": 1, "bee": 2, "pen": 9}
    eq(low_stock(stock, 3), ["ant", "bee", "zip"], "fewer than 3, sorted")
    eq(low_stock(stock, 0), [], "threshold 0")
    eq(low_stock({}, 5), [], "empty stock")


@check("line-total")
def _():
    from orders import line_total
    for price, qty, want in [("19.99", 7, 13993), ("2.5", 2, 500), ("0.07", 1, 7), ("3", 0, 0),
                             ("4.35", 2, 870), ("1.15", 7, 805)]:
        eq(line_total(price, qty), want, f"line_total({price!r}, {qty})")


@check("apply-coupon")
def _():
    from orders import apply_coupon
    for total, pct, want in [(1005, 10, 904), (999, 0, 999), (1000, 100, 0), (1, 50, 0),
                             (3, 50, 1), (999, 15, 849), (1234, 25, 925),
                             (1002, 10, 902), (10, 33, 7)]:
        eq(apply_coupon(total, pct), want, f"apply_coupon({total}, {pct})")


@check("order-total")
def _():
    from orders import order_total
    stock = {"pen": 3, "ink": 1}
    eq(order_total([("pen", "1.15", 3)], stock, 10), 310, "total with a coupon")
    eq(stock, {"pen": 0, "ink": 1}, "stock after the order")
    stock = {"pen": 3, "ink": 1}
    raises(ValueError, order_total, [("pen", "1.00", 1), ("ink", "2.00", 2)], stock)
    eq(stock, {"pen": 3, "ink": 1}, "stock after an order that lacks ink")
    raises(ValueError, order_total, [("pen", "1.00", 2), ("pen", "1.00", 2)], stock)
    eq(stock, {"pen": 3, "ink": 1}, "stock after two lines that together lack pens")
    raises(ValueError, order_total, [("cap", "1.00", 1)], stock)
    eq(order_total([], stock), 0, "an empty order")


@check("receipt")
def _():
    from orders import receipt
    eq(receipt([]), ["TOTAL 0.00"], "an empty receipt")
    eq(receipt([("cap", "0.05", 1)]), ["cap x1 0.05", "TOTAL 0.05"], "one line")
    eq(receipt([("a", "1.00", 1), ("b", "2.00", 2), ("c", "0.29", 3)]),
       ["a x1 1.00", "b x2 4.00", "c x3 0.87", "TOTAL 5.87"], "three lines")
PY
