/*
 * moe.h: what verify.c asks of the MoE permutation (moe_verify.c).
 */
#ifndef TJ_OPS_MOE_H
#define TJ_OPS_MOE_H

#include "internal.h"

/* Is name one of kernels/moe_permute.hip's entries? */
int tj__moe_verify_knows(const char *name);
/* tj_verify of such an entry: the same arguments, errors and report. */
int tj__moe_verify(tj_runtime *rt, const char *kernel, uint64_t n,
                   uint64_t seed, tj_report *report);

#endif
