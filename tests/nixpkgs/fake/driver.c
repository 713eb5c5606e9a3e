/* The fake driver placed at the driver link after the builds: a libcuda.so.1 whose cuInit
 * succeeds, and a libnvidia-ml.so.1 whose nvmlInit_v2 does, so a program that prints 0 loaded
 * it rather than a stub (the stubs answer 34 and 999). Built twice, once per SONAME. */
int cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}

int nvmlInit_v2(void) { return 0; }
