/* B's C library, libprobe.so (as llama-cpp-python's libllama.so): it needs libcuda.so.1 (a
   DT_NEEDED from -lcuda against the stub). probe_init() returns what cuInit answered: 34 from the
   stub, 0 from the (fake) driver. Built with PROBE_CUDART it also uses libcudart, as CUDA
   libraries usually do, so that B references cuda_cudart's output at run time. */
int cuInit(unsigned int flags);

int probe_init(void) { return cuInit(0); }

#ifdef PROBE_CUDART
int cudaRuntimeGetVersion(int *version);

int probe_runtime_version(void) {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}
#endif
