// What an in-place state update can reach on a GPU: x = a x + b over 64 and 128 MiB of
// float32 (a decode step's states at B=64, H=32, D=M=S=64: BLA 64 MiB, IDA 128 MiB), with
// each thread updating 1, 4, 8 or 16 floats (all loaded before any is stored), as float2 or
// float4, and a block reading its 32 KiB twice (a reduction, then the update: the one-kernel
// steps' pattern, whose second read comes from L2). Prints the best of 20 runs after warm-up,
// timed with CUDA events, as µs and TB/s of read + write. Not part of the library's build:
//   nvcc -O3 -arch=sm_90 -o state_update_ceiling bench/state_update_ceiling.cu
// H200, in docs/performance.md.
#include <cuda_runtime.h>

#include <cstdio>

template <typename T, int K>
__global__ void update(T *x, float a, float b) {
  const size_t base = blockIdx.x * size_t(blockDim.x) * K + threadIdx.x;
  T v[K];
#pragma unroll
  for (int j = 0; j < K; ++j) v[j] = x[base + j * blockDim.x];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    float *f = reinterpret_cast<float *>(&v[j]);
    for (int e = 0; e < int(sizeof(T) / sizeof(float)); ++e) f[e] = a * f[e] + b;
    x[base + j * blockDim.x] = v[j];
  }
}

// Each block sums its `tile` floats, then updates them (read twice).
__global__ void read_twice(float *x, float *sums, int tile, float a, float b) {
  float *t = x + size_t(blockIdx.x) * tile;
  float s = 0;
  for (int i = threadIdx.x; i < tile; i += blockDim.x) s += t[i];
  __shared__ float partial[1024];
  partial[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < int(blockDim.x); ++i) s += partial[i];
    sums[blockIdx.x] = s;
  }
  for (int i = threadIdx.x; i < tile; i += blockDim.x) t[i] = a * t[i] + b;
}

int main() {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (size_t mib : {64, 128}) {
    const size_t n = mib << 18;  // floats
    float *x = nullptr, *sums = nullptr;
    if (cudaMalloc(&x, n * 4) != cudaSuccess || cudaMalloc(&sums, n / 1024 * 4) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc failed\n");
      return 1;
    }
    cudaMemset(x, 0, n * 4);
    const double gb = 2.0 * n * 4 / 1e9;
    auto best_us = [&](auto launch) {
      for (int w = 0; w < 3; ++w) launch();
      float best = 1e30f;
      for (int r = 0; r < 20; ++r) {
        float ms = 0;
        cudaEventRecord(e0);
        launch();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        best = ms < best ? ms : best;
      }
      return best * 1e3f;
    };
    auto report = [&](const char *name, float us) {
      std::printf("%zu MiB %-22s %7.1f us %5.2f TB/s\n", mib, name, us, gb / us * 1e3);
    };
    const int th = 256;
    report("1 float a thread", best_us([&] { update<float, 1><<<n / th, th>>>(x, .5f, 1.f); }));
    report("4 floats a thread", best_us([&] { update<float, 4><<<n / th / 4, th>>>(x, .5f, 1.f); }));
    report("8 floats a thread", best_us([&] { update<float, 8><<<n / th / 8, th>>>(x, .5f, 1.f); }));
    report("16 floats a thread", best_us([&] { update<float, 16><<<n / th / 16, th>>>(x, .5f, 1.f); }));
    report("1 float2 a thread",
           best_us([&] { update<float2, 1><<<n / 2 / th, th>>>(reinterpret_cast<float2 *>(x), .5f, 1.f); }));
    report("1 float4 a thread",
           best_us([&] { update<float4, 1><<<n / 4 / th, th>>>(reinterpret_cast<float4 *>(x), .5f, 1.f); }));
    report("32 KiB a block, twice", best_us([&] { read_twice<<<n / 8192, th>>>(x, sums, 8192, .5f, 1.f); }));
    cudaFree(x);
    cudaFree(sums);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
