// pilot_gelu_bwd.cu: the baseline tokitai-jit replaces, rebuilt the way the
// tokitai-operator pilots worked: a standalone executable per kernel, spawned
// per call, with fp16 values shipped as decimal bit patterns over stdin and
// the results printed as decimal bit patterns on stdout.
//
// Protocol (as the pilots used it): first line n; then n grad_output bit
// patterns; then n input bit patterns; whitespace-separated decimals.
// Output: n grad_input bit patterns, one per line.
//
// Build (bench only; the library never spawns anything):
//   nvcc -O3 -arch=sm_90 -o pilot_gelu_bwd bench/pilot_gelu_bwd.cu
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void gelu_bwd(const __half *g, const __half *x, __half *out, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const float c = 0.7978845608028654f, a = 0.044715f;
  float v = __half2float(x[i]);
  float t = tanhf(c * (v + a * v * v * v));
  float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c * (1.0f + 3.0f * a * v * v);
  out[i] = __float2half(__half2float(g[i]) * d);
}

static int fail(const char *what)
{
  fprintf(stderr, "pilot_gelu_bwd: %s\n", what);
  return 1;
}

int main()
{
  int n = 0;
  if (scanf("%d", &n) != 1 || n <= 0)
    return fail("bad n");
  std::vector<unsigned short> g(n), x(n), out(n);
  for (int i = 0; i < n; i++) {
    unsigned v;
    if (scanf("%u", &v) != 1)
      return fail("short grad_output");
    g[i] = (unsigned short)v;
  }
  for (int i = 0; i < n; i++) {
    unsigned v;
    if (scanf("%u", &v) != 1)
      return fail("short input");
    x[i] = (unsigned short)v;
  }
  __half *dg, *dx, *dout;
  size_t bytes = (size_t)n * 2;
  if (cudaMalloc(&dg, bytes) || cudaMalloc(&dx, bytes) || cudaMalloc(&dout, bytes))
    return fail("cudaMalloc");
  cudaMemcpy(dg, g.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
  gelu_bwd<<<(n + 255) / 256, 256>>>(dg, dx, dout, n);
  if (cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    return fail("kernel or copy failed");
  for (int i = 0; i < n; i++)
    printf("%u\n", (unsigned)out[i]);
  return 0;
}
