/* The real-cuda chain's runtime-API consumer (tests/nixpkgs/real-cuda.nix), linked to NVIDIA's
   libcudart.so.13 (which dlopens libcuda.so.1) and, as ggml-cuda and PyTorch's CUDA libraries
   are, to the driver API as well (-lcuda against cuda_cudart's stub): the executable's NEEDED
   entry decides which libcuda.so.1 the process gets, and libcudart's dlopen of the same name
   returns that one. The users' check: the GPU is found (count=1), the error is not
   cudaErrorStubLibrary. Then a device round trip (cudaMalloc, cudaMemset, cudaMemcpy).
   Exit status: 0 the round trip is right; 34 the stub answered; 1 any other failure. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

static int failed(const char *call, cudaError_t e) {
    printf("%s: %s (%d): %s\n", call, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    return e == cudaErrorStubLibrary ? 34 : 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return failed(#call, e_);                                           \
    } while (0)

int main(void) {
    int runtime = 0, driver = 0, count = 0;
    cudaRuntimeGetVersion(&runtime);
    /* The driver API, through whichever libcuda.so.1 the loader found (the stub answers too). */
    cuDriverGetVersion(&driver);
    printf("runtime %d, libcuda says driver %d\n", runtime, driver);
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return failed("cudaGetDeviceCount", e);
    struct cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    printf("cudaGetDeviceCount: count=%d, device 0: %s\n", count, prop.name);

    size_t n = 64 << 20;
    unsigned char *host = malloc(n), *dev = NULL;
    if (!host) return 1;
    TRY(cudaMalloc((void **)&dev, n));
    TRY(cudaMemset(dev, 0x5a, n));
    TRY(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
    TRY(cudaFree(dev));
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        if (host[i] != 0x5a) wrong++;
    if (wrong) {
        printf("round trip: %zu of %zu bytes wrong\n", wrong, n);
        return 1;
    }
    printf("round trip (cudaMalloc, cudaMemset, cudaMemcpy): OK, %zu bytes\n", n);
    return 0;
}
