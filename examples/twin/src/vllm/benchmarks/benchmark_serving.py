"""benchmark_serving (twin): only the unbuilt `benchmarks` stage copies it."""
