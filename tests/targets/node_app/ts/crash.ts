// A TypeScript program that ends with an uncaught exception thrown by a traced function of another .ts file.
import { restock, type Item } from "./inventory";

const fig: Item = { name: "fig", price: 7 };
console.log("restocked", restock(fig, 2));
restock(fig, -1);
