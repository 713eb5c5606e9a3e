/* The real-cuda chain's driver-API consumer (tests/nixpkgs/real-cuda.nix): cuInit, the GPU's
   name, then the PTX of tests/gpu/real-cuda/kernel.cu (kernel.ptx, embedded at build time as
   kernel_ptx) loaded with cuModuleLoadData and run: c[i] = k * a[i] + b[i], checked on the host.
   Linked with -lcuda against cuda_cudart's stub, so the loader decides which libcuda.so.1 answers:
   NVIDIA's stub says CUDA_ERROR_STUB_LIBRARY (34), the driver runs the kernel.
   Exit status: 0 the kernel's result is right; 34 the stub answered; 1 any other failure. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernel-ptx.h" /* static const char kernel_ptx[] */

/* Prints CALL's failure with the driver's name for it and returns 1 (34 for the stub). */
static int failed(const char *call, CUresult r) {
    const char *name = NULL;
    if (r == CUDA_ERROR_STUB_LIBRARY)
        name = "CUDA_ERROR_STUB_LIBRARY"; /* the stub answers cuGetErrorName with 34 too */
    else if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = "?";
    printf("%s: %s (%d)\n", call, name, (int)r);
    return r == CUDA_ERROR_STUB_LIBRARY ? 34 : 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) return failed(#call, r_);                                          \
    } while (0)

int main(void) {
    int version = 0, count = 0;
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return failed("cuInit", r);
    TRY(cuDriverGetVersion(&version));
    TRY(cuDeviceGetCount(&count));
    CUdevice dev;
    char name[256] = "";
    TRY(cuDeviceGet(&dev, 0));
    TRY(cuDeviceGetName(name, sizeof name, dev));
    printf("driver API version %d, count=%d, device 0: %s\n", version, count, name);

    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuModuleLoadData(&mod, kernel_ptx));
    TRY(cuModuleGetFunction(&fn, mod, "scale_add"));

    int n = 1 << 20;
    float k = 3.0f;
    size_t bytes = (size_t)n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    if (!a || !b || !c) return 1;
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 1.0f - (float)i;
    }
    CUdeviceptr da, db, dc;
    TRY(cuMemAlloc(&da, bytes));
    TRY(cuMemAlloc(&db, bytes));
    TRY(cuMemAlloc(&dc, bytes));
    TRY(cuMemcpyHtoD(da, a, bytes));
    TRY(cuMemcpyHtoD(db, b, bytes));
    void *args[] = {&da, &db, &dc, &k, &n};
    TRY(cuLaunchKernel(fn, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    TRY(cuCtxSynchronize());
    TRY(cuMemcpyDtoH(c, dc, bytes));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (c[i] != k * a[i] + b[i]) wrong++;
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dc);
    cuModuleUnload(mod);
    cuDevicePrimaryCtxRelease(dev);
    if (wrong) {
        printf("kernel scale_add: %d of %d elements wrong\n", wrong, n);
        return 1;
    }
    printf("kernel scale_add (cuModuleLoadData of PTX): OK, %d elements checked on the host\n", n);
    return 0;
}
