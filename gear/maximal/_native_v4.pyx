# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# The x86-64-v4 (AVX-512) build of gear/maximal/_native.pyx: the same source compiled for
# that instruction set; gear.maximal.native imports it where gear._core chose that build.
include "_native.pyx"
