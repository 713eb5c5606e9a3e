// A library with a CUDA kernel, linked against the driver API through NVIDIA's stub libcuda.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// Driver API: the first call into libcuda. NVIDIA's stub answers CUDA_ERROR_STUB_LIBRARY (34).
extern "C" int gpu_describe(char *name, int len, int *count) {
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return (int)r;
    if ((r = cuDeviceGetCount(count)) != CUDA_SUCCESS) return (int)r;
    CUdevice dev;
    if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return (int)r;
    return (int)cuDeviceGetName(name, len, dev);
}

// Runtime API: adds two vectors on the GPU and checks every element on the host.
// Returns the number of wrong elements, or -1 when a CUDA call fails.
extern "C" int vecadd_check(int n) {
    size_t bytes = (size_t)n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) { a[i] = (float)i; b[i] = 2.0f * (float)i + 1.0f; }
    float *da, *db, *dc;
    if (cudaMalloc(&da, bytes) || cudaMalloc(&db, bytes) || cudaMalloc(&dc, bytes)) return -1;
    cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
    add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return -1;
    cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n; i++) if (c[i] != 3.0f * (float)i + 1.0f) wrong++;
    cudaFree(da); cudaFree(db); cudaFree(dc);
    free(a); free(b); free(c);
    return wrong;
}
