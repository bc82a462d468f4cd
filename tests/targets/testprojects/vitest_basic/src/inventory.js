// A small stock-keeping module with two deliberate bugs for the adapter tests to find.

export class Inventory {
  constructor() {
    this.items = new Map();
  }

  receive(sku, count) {
    this.items.set(sku, (this.items.get(sku) ?? 0) + count);
  }

  // Bug: never refuses to go below zero.
  ship(sku, count) {
    this.items.set(sku, (this.items.get(sku) ?? 0) - count);
  }

  count(sku) {
    return this.items.get(sku) ?? 0;
  }
}

export function parseSku(text) {
  if (!/^[A-Z]{3}-\d{3}$/.test(text)) {
    throw new Error(`malformed SKU: ${text}`);
  }
  return text;
}
