"""Tests against a real Jupyter server with Conch in this process (pytest-jupyter): the API,
rounds, the door, the notebook tools, with scripted models, real kernels and real A2A peers."""
