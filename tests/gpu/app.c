/* The executable: uses the driver API itself, then asks the library for the GPU and for a checked
   vector add. */
#include <cuda.h>
#include <stdio.h>

int gpu_describe(char *name, int len, int *count);
int vecadd_check(int n);

int main(void) {
    int version = 0;
    /* Answered by whichever libcuda.so.1 the loader found: the stub answers too. */
    cuDriverGetVersion(&version);
    printf("libcuda driver API version: %d\n", version);
    char name[256] = "";
    int count = 0;
    int r = gpu_describe(name, sizeof name, &count);
    if (r == 34) {
        printf("cuInit: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library\n");
        return 34;
    }
    if (r != 0) {
        printf("cuInit/cuDevice*: error %d\n", r);
        return 1;
    }
    printf("devices: %d, device 0: %s\n", count, name);
    int n = 1 << 20;
    int wrong = vecadd_check(n);
    if (wrong != 0) {
        printf("vector add: FAILED (%d)\n", wrong);
        return 2;
    }
    printf("vector add: OK (%d elements checked on the host)\n", n);
    return 0;
}
