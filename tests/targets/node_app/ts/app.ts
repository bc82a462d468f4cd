// A TypeScript program for the Node tracing tests, run through tsx: a generic class with typed methods, an async
// function that resolves and rejects, functions imported from another .ts file.
import { label, priceOf, type Item } from "./inventory";

class Basket<T extends Item> {
  private readonly lines: Array<{ item: T; quantity: number }> = [];

  constructor(public readonly owner: string) {}

  add(item: T, quantity: number = 1): number {
    this.lines.push({ item, quantity });
    return this.lines.length;
  }

  total(): number {
    return this.lines.reduce((sum, line) => sum + priceOf(line.item, line.quantity), 0);
  }
}

async function delivery(city: string, express?: boolean): Promise<{ city: string; days: number }> {
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
  if (city === "") throw new RangeError("no city");
  return { city, days: express ? 1 : 3 };
}

async function main(): Promise<void> {
  const basket = new Basket<Item>("alice");
  basket.add({ name: "apple", price: 2 }, 3);
  basket.add({ name: "pear", price: 5 });
  console.log("total", basket.total());
  console.log("label", label({ name: "fig", price: 7 }));
  const plan = await delivery("Paris", true);
  console.log("delivery", plan.city, plan.days);
  try {
    await delivery("");
  } catch (error) {
    console.log("caught", (error as Error).message);
  }
}

main();
