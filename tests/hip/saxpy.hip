#include "hip/hip_runtime.h"

/*
 * saxpy.hip: y = a * x + y, one template body for float and double.
 *
 * Entries
 *   saxpy_f32(float a, const float *x, float *y, unsigned long long n)
 *   daxpy_f64(double a, const double *x, double *y, unsigned long long n)
 *   axpy<float>, axpy<double>: the same as C++ templates (mangled names)
 * Launch: any grid and block (grid-stride loop); no shared memory.
 */

template <typename T>
__device__ void axpy_body(T a, const T *x, T *y, unsigned long long n)
{
  unsigned long long stride = (unsigned long long)hipGridDim_x * hipBlockDim_x;
  for (unsigned long long i = (unsigned long long)hipBlockIdx_x * hipBlockDim_x +
                              hipThreadIdx_x;
       i < n; i += stride)
    y[i] = a * x[i] + y[i];
}

extern "C" __global__ void saxpy_f32(float a, const float *x, float *y,
                                     unsigned long long n)
{
  axpy_body<float>(a, x, y, n);
}

extern "C" __global__ void daxpy_f64(double a, const double *x, double *y,
                                     unsigned long long n)
{
  axpy_body<double>(a, x, y, n);
}

/* TODO(merge): once name expressions land, the suites compile these as
 * "axpy<float>" and "axpy<double>" too. */
template <typename T>
__global__ void axpy(T a, const T *x, T *y, unsigned long long n)
{
  axpy_body<T>(a, x, y, n);
}
template __global__ void axpy<float>(float, const float *, float *,
                                     unsigned long long);
template __global__ void axpy<double>(double, const double *, double *,
                                      unsigned long long);
