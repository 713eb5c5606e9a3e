/* Mock NVIDIA stub library: every call fails with CUDA_ERROR_STUB_LIBRARY
 * (34), like NVIDIA's libcuda.so / libnvidia-ml.so stubs. */
int cuInit(unsigned int flags) {
  (void)flags;
  return 34;
}

int nvmlInit_v2(void) { return 34; }
