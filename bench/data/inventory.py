"""A small inventory of parts: stock levels, reorder rules and a report."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Part:
    sku: str
    name: str
    quantity: int = 0
    reorder_level: int = 5
    unit_cost: float = 0.0


@dataclass
class Inventory:
    parts: dict = field(default_factory=dict)

    def add(self, part: Part) -> None:
        if part.sku in self.parts:
            raise ValueError(f"duplicate sku {part.sku}")
        self.parts[part.sku] = part

    def receive(self, sku: str, count: int) -> int:
        if count <= 0:
            raise ValueError("count must be positive")
        part = self.parts[sku]
        part.quantity += count
        return part.quantity

    def ship(self, sku: str, count: int) -> int:
        part = self.parts[sku]
        if count > part.quantity:
            raise ValueError(f"only {part.quantity} of {sku} in stock")
        part.quantity -= count
        return part.quantity

    def to_reorder(self) -> list:
        return [p for p in self.parts.values() if p.quantity <= p.reorder_level]

    def value(self) -> float:
        return sum(p.quantity * p.unit_cost for p in self.parts.values())

    def report(self) -> str:
        lines = [f"{'sku':<8} {'name':<20} {'qty':>5} {'value':>10}"]
        for p in sorted(self.parts.values(), key=lambda p: p.sku):
            lines.append(f"{p.sku:<8} {p.name:<20} {p.quantity:>5} {p.quantity * p.unit_cost:>10.2f}")
        lines.append(f"{'total':<34} {self.value():>10.2f}")
        return "\n".join(lines)


def demo() -> None:
    inv = Inventory()
    inv.add(Part("A100", "bolt", 40, 10, 0.25))
    inv.add(Part("B200", "nut", 8, 10, 0.10))
    inv.receive("B200", 20)
    inv.ship("A100", 35)
    print(inv.report())
    print("reorder:", [p.sku for p in inv.to_reorder()])
