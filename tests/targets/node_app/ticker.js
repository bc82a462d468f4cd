// Calls tick() every 20 ms until the file named by argv[2] exists.
const fs = require("fs");

function tick(n) {
  return n + 1;
}

let count = 0;
console.log("ready");
const timer = setInterval(() => {
  count = tick(count);
  if (fs.existsSync(process.argv[2])) {
    clearInterval(timer);
    console.log("ticks", count > 0);
  }
}, 20);
