def apply_discount(price, percent):
    """Return price reduced by percent (a number from 0 to 100), rounded to 2 decimals."""
    return round(price - price * percent, 2)
