// Ends with an uncaught exception thrown two calls deep.
function explode(config) {
  return config.missing.value;
}

function start() {
  return explode({ name: "demo" });
}

console.log("starting");
start();
