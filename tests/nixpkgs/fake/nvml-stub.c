/* Stand-in for NVIDIA's libnvidia-ml.so stub (cuda_nvml_dev's `stubs` output): it links and
 * loads, and fails. */
int nvmlInit_v2(void) { return 999; }
