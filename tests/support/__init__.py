"""What the tests and the benchmarks share: real servers, kernels, peers, scripted models and a
browser, started and stopped the same way everywhere (`python -m benchmarks.…` imports them as
`tests.support.…`)."""
