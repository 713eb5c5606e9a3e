/* Stand-in for NVIDIA's libcuda.so stub: it links, loads, and every entry
 * point fails with CUDA_ERROR_STUB_LIBRARY (34), as the real stub does. */
int cuInit(unsigned int flags) {
  (void)flags;
  return 34;
}

int cuDriverGetVersion(int *version) {
  if (version) *version = 0;
  return 34;
}
