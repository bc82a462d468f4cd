"""A small shop: the functions the Python tracing tests select by name, file and project."""

from dataclasses import dataclass, field

TAX_RATE = 0.2
settings = {"currency": "EUR", "limits": {"items": 3}}


@dataclass
class Item:
    name: str
    price: int


@dataclass
class Cart:
    owner: str
    items: list[Item] = field(default_factory=list)

    def add(self, item: Item) -> int:
        if len(self.items) >= settings["limits"]["items"]:
            raise ValueError(f"cart of {self.owner} is full")
        self.items.append(item)
        return len(self.items)

    def total(self) -> float:
        return round(sum(i.price for i in self.items) * (1 + TAX_RATE), 2)


def prices(cart: Cart):
    for item in cart.items:
        yield item.price


def checkout(owner: str, names: list[str]) -> float:
    cart = Cart(owner)
    for n, name in enumerate(names):
        try:  # noqa: SIM105 - a plain handler: the program must not differ in what the test counts
            cart.add(Item(name, 10 * (n + 1)))
        except ValueError:
            pass
    list(prices(cart))
    return cart.total()


def explode(order_id: int) -> None:
    pending = [order_id, order_id + 1]
    raise RuntimeError(f"order {order_id} cannot ship ({len(pending)} pending)")
