// A module app.ts and crash.ts import: typed functions, an interface, an arrow held by a const.
export interface Item {
  name: string;
  price: number;
}

export function priceOf(item: Item, quantity: number): number {
  return item.price * quantity;
}

export const label = (item: Item): string => `${item.name} @ ${item.price}`;

export function restock(item: Item, count: number): number {
  if (count < 0) throw new RangeError(`cannot restock ${count} ${item.name}`);
  return count;
}
