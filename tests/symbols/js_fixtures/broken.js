// A syntax error: the parameter list is never closed.
function fine() { return 1; }

function broken(a, b {
  return a + b;
}
