/* Stand-in for libcudart.so, so that cuda_cudart's lib/ holds a library as NVIDIA's does. */
int cudaRuntimeGetVersion(int *version) {
  *version = 12090;
  return 0;
}
