// The kernel of the real-cuda chain (tests/nixpkgs/real-cuda/): c[i] = k * a[i] + b[i].
// tests/gpu/pack-cudart.sh builds its PTX on the GPU machine (nvcc -ptx -arch=compute_75); the
// output is committed as tests/nixpkgs/real-cuda/kernel.ptx, which the driver-API consumer
// embeds and loads with cuModuleLoadData, so no nvcc is needed to build it.
extern "C" __global__ void scale_add(const float *a, const float *b, float *c, float k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = k * a[i] + b[i];
}
