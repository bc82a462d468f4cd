// Tests live under test/unit and test/e2e (the adapter's levels).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.js"],
  },
});
