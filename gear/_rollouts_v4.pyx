# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# The x86-64-v4 (AVX-512) build of gear/_rollouts.pyx: the same source compiled for
# that instruction set; gear/_core.py imports it on processors that have it.
include "_rollouts.pyx"
