/** Tests live under tests/unit and tests/integration (the adapter's levels). */
module.exports = {
  testMatch: ["**/tests/**/*.test.js"],
};
