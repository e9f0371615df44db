/*
 * cli_gemm.c: the GEMM family at the command line.  --run gemm and
 * --run grouped_gemm take the descriptor (and the routing) that the
 * options describe from here, and cli_run (cli_gpu.c) has
 * tj_verify_gemm or tj_verify_grouped_gemm run and check it.  --warm
 * gemm and --warm grouped_gemm ask tj_gemm_kernel or
 * tj_grouped_gemm_kernel for that configuration on a runtime for each
 * --arch (compile-only without a GPU), which compiles it into the
 * cache, so that an image builder can ship family configurations
 * precompiled.  A client of the public API only.
 */
#include "config.h"
#include "cli_commands.h"
#include "cli_format.h"
#include "tokitai-jit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_gemm_desc(const cli_options *o, int shape, tj_gemm_desc *d)
{
  memset(d, 0, sizeof *d);
  d->size = sizeof *d;
  d->a_type = d->b_type = o->gemm_ab_type;
  d->c_type = o->gemm_c_type;
  d->trans_a = o->gemm_trans_a;
  d->trans_b = o->gemm_trans_b;
  d->m = o->shapes[shape][0];
  d->n = o->shapes[shape][1];
  d->k = o->shapes[shape][2];
  d->alpha = 1.0f;
  d->epilogue = o->gemm_epilogue;
  /* tj_verify_gemm reads these two as requests for the optional outputs
   * and never dereferences them. */
  static float wanted;
  d->aux = o->gemm_aux ? &wanted : NULL;
  d->bias_grad = o->gemm_bias_grad ? &wanted : NULL;
}

int32_t *cli_grouped_routing(const cli_options *o, int shape)
{
  int64_t groups = o->gemm_groups;
  int64_t total = o->gemm_grouped == TJ_GROUPED_K ? o->shapes[shape][2]
                                                   : o->shapes[shape][0];
  int32_t *offs = calloc((size_t)groups, sizeof *offs);
  if (!offs)
    return NULL;
  for (int64_t e = 0; e < groups; e++) {
    int64_t left = e ? total - offs[e - 1] : total;
    offs[e] = (int32_t)(o->gemm_skewed ? total - (left - left / 2)
                                       : (e + 1) * total / groups);
  }
  offs[groups - 1] = (int32_t)total;
  return offs;
}

/* ------------------------------------------------------------ --warm gemm */

static size_t type_bytes(int type)
{
  return type == TJ_DTYPE_F32 ? 4 : 2;
}

/* a * b * c bytes, SIZE_MAX when that overflows (place refuses it). */
static size_t bytes_of(size_t a, size_t b, size_t c)
{
  size_t n;
  if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n))
    return SIZE_MAX;
  return n;
}

/* Give p the next span bytes of a made-up address range; 0, or -1 past
 * what an address holds. */
static int place(uintptr_t *next, size_t span, const void **p)
{
  uintptr_t at = (*next + 255) & ~(uintptr_t)255;
  if (at < *next || at + span < at)
    return -1;
  *p = (const void *)at;
  *next = at + span;
  return 0;
}

/* tj_gemm_kernel checks the pointers as tj_gemm does and never reads
 * them: a compile-only runtime has no memory to point into, so each
 * array gets a distinct, aligned range of addresses of its own size. */
static int lay_out(tj_gemm_desc *d)
{
  size_t ea = type_bytes(d->a_type), ec = type_bytes(d->c_type);
  size_t m = (size_t)d->m, n = (size_t)d->n, k = (size_t)d->k;
  uintptr_t next = (uintptr_t)1 << 20;
  const void *c = NULL, *aux = NULL, *bias_grad = NULL;
  int e = d->epilogue;
  d->lda = d->trans_a ? d->m : d->k;
  d->ldb = d->trans_b ? d->k : d->n;
  d->ldc = d->n;
  int rc = place(&next, bytes_of(m, k, ea), &d->a) |
           place(&next, bytes_of(k, n, ea), &d->b) |
           place(&next, bytes_of(m, n, ec), &c);
  d->c = (void *)c;
  if (e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU)
    rc |= place(&next, bytes_of(n, ec, 1), &d->bias);
  if (d->aux || e == TJ_EPILOGUE_DGELU) {
    rc |= place(&next, bytes_of(m, n, ec), &aux);
    d->aux = (void *)aux;
    d->ldaux = d->n;
  }
  if (d->bias_grad) {
    rc |= place(&next, bytes_of(n, 4, 1), &bias_grad);
    d->bias_grad = (float *)bias_grad;
  }
  return rc;
}

/* lay_out for the grouped call: B (TJ_GROUPED_M) or C (TJ_GROUPED_K)
 * holds one matrix a group, bias and bias_grad one row a group, and offs
 * one int32 a group. */
static int lay_out_grouped(tj_grouped_gemm_desc *g)
{
  size_t ea = type_bytes(g->a_type), ec = type_bytes(g->c_type);
  size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
  size_t groups = (size_t)g->groups;
  int by_m = g->grouped == TJ_GROUPED_M, e = g->epilogue;
  uintptr_t next = (uintptr_t)1 << 20;
  const void *c = NULL, *aux = NULL, *bias_grad = NULL, *offs = NULL;
  g->lda = g->trans_a ? g->m : g->k;
  g->ldb = g->trans_b ? g->k : g->n;
  g->ldc = g->n;
  g->stride_b = by_m ? g->k * g->ldb : 0; /* k x n, or n x k: k * n */
  g->stride_c = by_m ? 0 : g->m * g->ldc;
  int rc = place(&next, bytes_of(m, k, ea), &g->a) |
           place(&next, bytes_of(by_m ? groups : 1, k * n, ea), &g->b) |
           place(&next, bytes_of(by_m ? 1 : groups, m * n, ec), &c) |
           place(&next, bytes_of(groups, 4, 1), &offs);
  g->c = (void *)c;
  g->offs = offs;
  if (e == TJ_EPILOGUE_BIAS || e == TJ_EPILOGUE_BIAS_GELU)
    rc |= place(&next, bytes_of(groups, n, ec), &g->bias);
  if (g->aux || e == TJ_EPILOGUE_DGELU) {
    rc |= place(&next, bytes_of(m, n, ec), &aux);
    g->aux = (void *)aux;
    g->ldaux = g->n;
  }
  if (g->bias_grad) {
    rc |= place(&next, bytes_of(groups, n, 4), &bias_grad);
    g->bias_grad = (float *)bias_grad;
  }
  return rc;
}

void cli_grouped_desc(const cli_options *o, int shape,
                      tj_grouped_gemm_desc *g)
{
  tj_gemm_desc d;
  cli_gemm_desc(o, shape, &d);
  memset(g, 0, sizeof *g);
  g->size = sizeof *g;
  g->a_type = d.a_type;
  g->b_type = d.b_type;
  g->c_type = d.c_type;
  g->trans_a = d.trans_a;
  g->trans_b = d.trans_b;
  g->grouped = o->gemm_grouped;
  g->groups = o->gemm_groups;
  g->m = d.m, g->n = d.n, g->k = d.k;
  g->alpha = d.alpha;
  g->epilogue = d.epilogue;
  g->aux = d.aux;
  g->bias_grad = d.bias_grad;
}

/* The name of the configuration of shape i (compiled or loaded on rt),
 * NULL with tj_errmsg; -1 in *too_large when the shape cannot be laid
 * out in an address space. */
static const char *configuration(const cli_options *o, tj_runtime *rt,
                                 int i, int *too_large)
{
  tj_gemm_desc d;
  tj_grouped_gemm_desc g;
  if (cli_gemm_command(o) == CLI_GEMM_GROUPED) {
    cli_grouped_desc(o, i, &g);
    if ((*too_large = lay_out_grouped(&g)) != 0)
      return NULL;
    return tj_grouped_gemm_kernel(rt, &g);
  }
  cli_gemm_desc(o, i, &d);
  if ((*too_large = lay_out(&d)) != 0)
    return NULL;
  return tj_gemm_kernel(rt, &d);
}

static int is_embedded(const char *name)
{
  for (size_t i = 0; i < tj_embedded_count(); i++)
    if (strcmp(tj_embedded_name(i), name) == 0)
      return 1;
  return 0;
}

static double stats_compile_ms(tj_runtime *rt, uint64_t *compiles)
{
  tj_stats s;
  if (tj_runtime_get_stats(rt, &s) != TJ_OK)
    return *compiles = 0, 0;
  *compiles = s.compiles;
  return s.compile_ms;
}

/* Compile (or find cached) the configuration of shape i on rt and say
 * which it is.  The f16 combination that tj_gemm_f16 serves names an
 * embedded kernel without compiling it: that is compiled by name. */
static int warm_one(const cli_options *o, tj_runtime *rt, int i)
{
  tj_kernel *k;
  uint64_t before, after;
  int too_large = 0;
  const int *s = o->shapes[i];
  double ms = stats_compile_ms(rt, &before);
  const char *name = configuration(o, rt, i, &too_large);
  if (too_large) {
    cli_error("--shape %dx%dx%d is too large to address", s[0], s[1], s[2]);
    return EXIT_FAIL;
  }
  if (name && is_embedded(name) && tj_kernel_get(rt, name, &k) != TJ_OK)
    name = NULL;
  if (!name) {
    cli_error("%s %dx%dx%d for %s: %s", o->kernels[0], s[0], s[1], s[2],
              tj_runtime_arch(rt), tj_errmsg(rt));
    return EXIT_FAIL;
  }
  ms = stats_compile_ms(rt, &after) - ms;
  char took[32];
  cli_format_ms(ms, took, sizeof took);
  if (!o->quiet)
    printf("%s for %s (%dx%dx%d): %s\n", name, tj_runtime_arch(rt), s[0],
           s[1], s[2], after > before ? took : "already cached");
  return EXIT_OK;
}

static tj_runtime *open_for(const cli_options *o, const char *arch)
{
  tj_options opts = cli_runtime_options(o, arch);
  tj_runtime *rt = NULL;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc == TJ_OK && !tj_runtime_cache_path(rt))
    cli_error("cannot warm the cache: %s", tj_errmsg(rt));
  else if (rc != TJ_OK && arch)
    cli_error("--arch %s: %s", arch, tj_errmsg(rt));
  else if (rc != TJ_OK)
    cli_error("cannot warm for this machine's GPU: %s (give --arch to "
              "compile without one)", tj_errmsg(rt));
  if (rc == TJ_OK && tj_runtime_cache_path(rt))
    return rt;
  tj_runtime_close(rt);
  return NULL;
}

int cli_warm_gemm(const cli_options *o)
{
  int n = o->narchs ? o->narchs : 1, failed = 0;
  for (int a = 0; a < n; a++) {
    tj_runtime *rt = open_for(o, o->narchs ? o->archs[a] : NULL);
    if (!rt)
      return EXIT_FAIL;
    for (int i = 0; i < o->nshapes; i++)
      failed |= warm_one(o, rt, i) != EXIT_OK;
    tj_runtime_close(rt);
  }
  return failed ? EXIT_FAIL : EXIT_OK;
}
