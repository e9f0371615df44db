/*
 * gemm_skinny_f16.h: what the two skinny GEMM files share
 * (kernels/gemm_skinny_f16.hip, the fp32-FMA entries;
 * kernels/gemm_skinny_f16_tc.hip, the tensor-core ones): the arguments
 * every entry takes, as one struct.  Each file's "embed: prepend" puts it
 * in front of that file's source; the two compile separately, so a call
 * that needs one path does not wait for the other's code.
 */

struct tj_sk_params {
  int M, N, K;
  float alpha, beta;
  const __half *A, *B;
  __half *C;
  int lda, ldb, ldc;
};

/* The entries are written out, not made by a macro: the library's table
 * of embedded kernels and their installed contracts are read off the
 * lines that start with extern "C". */
#define TJ_SK_PARAMS {M, N, K, alpha, beta, A, B, C, lda, ldb, ldc}
