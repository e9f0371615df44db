/*
 * plan.h: what tj_gemm_f16 runs, between the file that decides it
 * (plan.c: which kernel, its grid, split and shared memory, from the
 * shape, the operands' alignment, the device, the knobs and the tuning
 * decisions) and the files that launch it (gemm.c; hopper.c the Hopper
 * plans).  The
 * launch shapes are the ones the contracts in kernels/<name>.hip give;
 * tests/check_kernels.c pins the block sizes against the sources.
 */
#ifndef TJ_OPS_GEMM_PLAN_H
#define TJ_OPS_GEMM_PLAN_H

#include "gemm.h"

/* gemm_f16.hip: one block of 128 threads per 128 x 128 tile of C, with
 * N tiles along x and M tiles along y; gridDim.y is capped at 65535. */
#define GEMM_THREADS 128u
#define GEMM_TILE 128
#define GEMM_GRID_Y_CAP 65535
/* The kernel's tile loops index in int and run up to a tile (plus a
 * k-step) past each dimension, so dimensions stay clear of INT_MAX. */
#define GEMM_DIM_MAX (INT_MAX - 256)
/* gemm_skinny_f16.hip: for M <= 8, one block per 32-column strip of C,
 * entries built for 1, 2, 4 and 8 rows with 1024, 1024, 512 and 256
 * threads. */
#define SKINNY_MAX_M 8
#define SKINNY_COLS 32
/* gemm_skinny_f16_tc.hip's tensor-core entries (NVIDIA sm_80 and later): for
 * M <= 16, 128 threads and 60 KiB of dynamic shared memory a block, one
 * block per strip of C (table skinny_tc below) and K-range; K is split
 * only while the strips are fewer than half the device's SMs (rt->sms), into
 * parts of SKINNY_TC_MIN_KROWS rows or more (8 pipeline stages), added by
 * ..._tc_reduce (256 threads) in a fixed order. */
#define SKINNY_TC_MAX_M 16
#define SKINNY_TC_THREADS 128u
#define SKINNY_TC_SHARED 61440u
#define SKINNY_TC_BK 64
#define SKINNY_TC_MIN_KROWS 512
#define SKINNY_TC_SPLIT_MAX 16
#define SKINNY_TC_REDUCE_THREADS 256u
/* gemm_sm90a.hip (sm_90 devices): 384 threads per 128 x BN tile, BN
 * 64, 128 or 256, with the dynamic shared memory of the tile's stages
 * (plan_sm90a says which tile) and of its epilogue's buffers
 * (SM90A_EPI_BYTES: two 64 x 64 fp16 boxes for each consumer
 * warpgroup). */
#define SM90A_THREADS 384u
#define SM90A_BM 128
#define SM90A_EPI_BYTES (2 * 2 * 64 * 64 * 2)
/* The stages of a 128 x bn tile (gemm_sm90a.hip's TJ_H_STAGES): as many
 * as fit beside its epilogue. */
#define SM90A_STAGES(bn) ((bn) == 64 ? 8 : (bn) == 256 ? 4 : 5)
#define SM90A_SHARED(bn, stages)                                  \
  ((stages) * (SM90A_BM + (bn)) * 64 * 2 + SM90A_EPI_BYTES + 1024 + \
   16 * (stages))
/* The 128 x 64 tile split across a cluster of two: the 8 stages of
 * 128 x 64 and one more barrier (the other block's fp32 sums of the tile
 * land in the epilogue's buffers). */
#define SM90A_SHARED_K2 (SM90A_SHARED(64, 8) + 16)
/* Split-K (the 128 x 128 tile's partials, then gemm_sm90a.hip's reduce
 * with 256 threads a block): only while the 128 x 128 tiles leave SMs
 * idle (of rt->sms: the device's count, TJ__FALLBACK_SMS without one), and
 * with SM90A_SPLIT_MIN_KTILES k-tiles of 64 or more per split, so that
 * each block runs its 5-stage pipeline a few times over and the fp32
 * partials stay small beside the work they save. */
#define SM90A_SPLIT_MIN_KTILES 16
#define SM90A_SPLIT_MAX 16
/* The Hopper skinny kernel (M <= 16): 160 threads, 128 columns of C a
 * block, K split across a cluster of 1, 2, 3, 4 or 8 blocks (a code
 * object each); A's TMA box is its 16 rows. */
#define SM90A_SKINNY_ROWS TJ__GEMM_SKINNY_ROWS
#define SM90A_SKINNY_THREADS 160u
#define SM90A_SKINNY_BN 128
/* Its stages, each a k-tile of 64: B's 64 x bn halves and A's rows. */
#define SM90A_SKINNY_STAGES 5
#define SM90A_SKINNY_STAGE_BYTES(bn) \
  (64u * (bn) * 2u + SM90A_SKINNY_ROWS * 64u * 2u)
/* Its dynamic shared memory, as the kernel lays it out (TJ_S_SMEM_BYTES
 * in kernels/gemm_f16_sm90a.h): the stages, 1 KiB for their alignment,
 * two barriers a stage, the block's fp32 sums (rows x bn), and the sums
 * it receives from the other split - 1 blocks of its cluster for the
 * groups of four columns it finishes (at most ceil(4 bn / (threads
 * split)) runs of a block's threads). */
#define SM90A_SKINNY_SLOTS(bn, split)                            \
  ((4u * (bn) + SM90A_SKINNY_THREADS * (split) - 1u) /           \
   (SM90A_SKINNY_THREADS * (split)) * SM90A_SKINNY_THREADS)
#define SM90A_SKINNY_SHARED(bn, split)                                    \
  (SM90A_SKINNY_STAGES * SM90A_SKINNY_STAGE_BYTES(bn) + 1024u +           \
   2u * 8u * SM90A_SKINNY_STAGES + SM90A_SKINNY_ROWS * (bn) * 4u +       \
   ((split) - 1u) * SM90A_SKINNY_SLOTS(bn, split) * 16u)
/* plan_sm90a: an unforced split stands only for M <= SM90A_SPLIT_ROWS,
 * where each part keeps SM90A_SPLIT_KEEP_KTILES k-tiles, or where 128 x 64
 * tiles would fill less than a quarter of the SMs. */
#define SM90A_SPLIT_ROWS 64
#define SM90A_SPLIT_KEEP_KTILES 32

/* Which entry a GEMM runs, and its launch shape; split > 1 for split-K,
 * with kper k-tiles per split (grid.z = split) on the sm90a path and kper
 * rows of K per split (grid.y = split) on the skinny tensor-core path. */
typedef enum tj__gemm_path {
  GEMM_PATH_PLAIN,
  GEMM_PATH_SM90A,
  GEMM_PATH_SKINNY_TC,
  GEMM_PATH_SM90A_SKINNY /* split: the cluster's blocks, no workspace */
} tj__gemm_path;
/* The kind of a Hopper tile plan: the entry's way of covering C
 * (kernels/gemm_sm90a.hip's TJ_H_KIND). */
typedef enum tj__gemm_kind {
  GEMM_KIND_TILE,       /* one tile a block */
  GEMM_KIND_PERSISTENT, /* one block an SM, walking the tiles */
  GEMM_KIND_MC2,        /* persistent, clusters of two sharing B */
  GEMM_KIND_CLUSTER_K2, /* each tile's K split across a cluster of two */
  GEMM_KIND_SPLIT,      /* split-K into a workspace, then a reduce */
  GEMM_KIND_SKINNY      /* the skinny kernel (M <= 16): tile_n columns a
                           strip, K split across a cluster of split */
} tj__gemm_kind;
typedef struct tj__gemm_plan {
  const char *entry; /* the embedded entry; NULL on the Hopper paths,
                        whose configurations hopper.c names from kind,
                        tile_n and split */
  tj_dim3 grid, block;
  unsigned shared; /* dynamic: the sm90a and skinny tensor-core entries */
  int split, kper;
  tj__gemm_path path;
  int tile_n; /* columns of C a block owns (the skinny tensor-core path,
                 the Hopper skinny kernel and tiles) */
  int tma_store; /* the tiles store C through TMA where the call allows it
                    (a configuration's; the knobs override it) */
  tj__gemm_kind kind; /* the Hopper tiles' */
} tj__gemm_plan;

/* What a call runs.  On the Hopper path the tuning decision for the
 * call's shape class takes the heuristic's place; a forced split (the
 * knobs) overrides both.  Arguments already checked. */
tj__gemm_plan tj__gemm_plan_call(tj_runtime *rt, int M, int N, int K,
                                 const void *A, int lda, const void *B,
                                 int ldb, const void *C, int ldc);
/* The Hopper tile plan, for any M, that the rule (with rt's knobs) makes
 * for an M x N x K call: the family's (hopper.c), whose configurations
 * take no tuning decision. */
tj__gemm_plan tj__gemm_plan_tiles(const tj_runtime *rt, int M, int N, int K);
/* The Hopper skinny kernel's plan (M <= 16) that the rule (with rt's
 * knobs) makes for N columns and K; whether it may run at all:
 * tj__gemm_skinny_on. */
tj__gemm_plan tj__gemm_plan_skinny(const tj_runtime *rt, int N, int K);
int tj__gemm_skinny_on(const tj_runtime *rt);
/* The plan of one configuration (configs.c), on sms SMs. */
tj__gemm_plan tj__gemm_plan_config(const tj__gemm_config *c, int sms, int M,
                                   int N, int K);

#endif
