/* D for tests/gpu/consumers.sh: a program that links only B's libvecadd.so (not libcuda), asks it
   for the GPU and for a checked vector add. Exits 34 when the stub answered, 0 on the GPU. */
#include <stdio.h>

int gpu_describe(char *name, int len, int *count);
int vecadd_check(int n);

int main(void) {
  char name[256] = "";
  int count = 0;
  int r = gpu_describe(name, sizeof name, &count);
  if (r == 34) {
    printf("d: cuInit: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library\n");
    return 34;
  }
  if (r != 0) {
    printf("d: cuInit/cuDevice*: error %d\n", r);
    return 1;
  }
  printf("d: devices: %d, device 0: %s\n", count, name);
  int wrong = vecadd_check(1 << 20);
  printf("d: vector add: %s\n", wrong == 0 ? "OK" : "FAILED");
  return wrong == 0 ? 0 : 2;
}
