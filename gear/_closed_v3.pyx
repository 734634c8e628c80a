# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# The x86-64-v3 (AVX2, FMA) build of gear/_closed.pyx: the same source compiled for
# that instruction set; gear/_core.py imports it on processors that have it.
include "_closed.pyx"
