"""Load and soak suites (short by default; --run-slow for the full ones) and the JupyterHub
suite."""
