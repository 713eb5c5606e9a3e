/* Mock libcudart: just enough to be a real shared library in the lib output. */
int cudaRuntimeGetVersion(int *version) {
  if (version) *version = 12080;
  return 0;
}
