"""inventory: stock levels as a dict from SKU to units on hand."""


def add_stock(stock, sku, qty):
    """Add qty units of sku to stock (a SKU not yet in stock starts at 0)."""
    stock[sku] = stock.get(sku, 0) + qty


def remove_stock(stock, sku, qty):
    """Take qty units of sku out of stock. Raises ValueError when fewer than qty units are on
    hand (an unknown SKU has none); stock is then left unchanged."""
    if stock.get(sku, 0) < qty:
        raise ValueError(f"not enough {sku}")
    stock[sku] -= qty


def low_stock(stock, threshold):
    """The SKUs with fewer than threshold units on hand, sorted by name."""
    return sorted(sku for sku, qty in stock.items() if qty < threshold)
