"""Tests of whole Jupyter servers as processes: restarts, crashes, two servers pairing, kernels
started from outside, the installed wheel."""
