// Calls tick() every 20 ms until the file named by argv[2] exists.
const fs = require("fs");

function tick(n) {
  return n + 1;
}
const twice = (n) => n * 2; // an expression body: cannot be given new code once loaded

let count = 0;
console.log("ready");
const timer = setInterval(() => {
  count = tick(count);
  twice(count);
  if (fs.existsSync(process.argv[2])) {
    clearInterval(timer);
    console.log("ticks", count > 0);
  }
}, 20);
