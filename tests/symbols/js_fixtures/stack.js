// Stack traces: an error thrown three calls deep; its stack goes to stderr, where the test compares lines.
Error.stackTraceLimit = 50; // each wrapped function adds two frames (the runtime's and the body arrow's)

function deepest(value) {
  if (value > 2) {
    throw new Error(`too big: ${value}`);
  }
  return value;
}

const middle = (value) => {
  const result = deepest(value + 1);
  return result;
};

class Runner {
  run(value) {
    return middle(value * 2);
  }
}

try {
  new Runner().run(1);
} catch (error) {
  console.log('caught', error.message);
  console.error(error.stack);
}
