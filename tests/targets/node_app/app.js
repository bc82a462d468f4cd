// A CommonJS program for the Node tracing tests: classes, a required module, async functions that resolve and reject.
const { login } = require("./auth");

class Cart {
  constructor(owner) {
    this.owner = owner;
    this.items = [];
  }

  add(item, qty) {
    this.items.push({ item, qty });
    return this.items.length;
  }

  total() {
    return this.items.reduce((sum, line) => sum + line.qty, 0);
  }
}

async function fetchUser(id) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  if (id < 0) throw new RangeError("no such user " + id);
  return { id, name: "user" + id };
}

async function main() {
  const cart = new Cart("alice");
  cart.add("apple", 2);
  cart.add("pear", 3);
  console.log("total", cart.total());
  console.log("login", login("alice", "secret"));
  const user = await fetchUser(7);
  console.log("user", user.name);
  try {
    await fetchUser(-1);
  } catch (error) {
    console.log("caught", error.message);
  }
}

main();
