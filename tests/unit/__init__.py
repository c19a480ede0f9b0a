"""Tests with no Jupyter server: pure rules, real SQLite files, scripted model servers and
A2A peers on loopback."""
