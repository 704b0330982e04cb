"""A CPU emulation of the GPU for the test-suite (see cuda_emu.h, fake_libcuda.cc, fakecupy/)."""
