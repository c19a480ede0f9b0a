"""Side-by-side benchmarks (never timed tests). Run each from the checkout as a module,
`python -m benchmarks.bench_door`; see README.md here."""
