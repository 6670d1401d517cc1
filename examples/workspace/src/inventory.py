"""A tiny inventory module (example workspace for codemode)."""

ITEMS = {"apples": 3, "pears": 0, "plums": 12}


def in_stock(name: str) -> bool:
    # TODO: treat unknown items as an error instead of False
    return ITEMS.get(name, 0) > 0


def restock(name: str, count: int) -> None:
    # TODO: validate that count is positive
    ITEMS[name] = ITEMS.get(name, 0) + count
