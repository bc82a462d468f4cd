"""Test runs: framework adapters (detect, build commands, parse reports), the runner, the stuck detector."""
