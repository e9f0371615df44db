/*
 * half.c: IEEE 754 binary16 <-> binary32 on the host, by bit manipulation.
 *
 * The fp16 kernels take and give raw binary16 bits; the host needs the same
 * conversions to fill inputs and read results.  Integer arithmetic only, so
 * the result is the same on every host, with or without F16C, and whatever
 * the FPU's rounding mode or flush-to-zero setting.
 */
#include "tokitai-jit.h"

#include <stdint.h>
#include <string.h>

#define F32_EXP_MASK 0xffu
#define F32_MAN_BITS 23
#define F32_MAN_MASK 0x7fffffu
#define F32_QUIET 0x400000u
#define F16_INF 0x7c00u
#define F16_QUIET 0x200u
#define F16_MAN_MASK 0x3ffu
/* float mantissa bits that do not fit in a half mantissa */
#define MAN_DROP (F32_MAN_BITS - 10)
/* float bias 127 minus half bias 15 */
#define BIAS_DIFF 112

static uint32_t float_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* v >> shift, rounded to nearest with ties to even (1 <= shift <= 31). */
static uint32_t shift_round_even(uint32_t v, unsigned shift)
{
  uint32_t q = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u)))
    q++;
  return q;
}

/* Inf stays inf; a NaN is made quiet and keeps the top of its payload, so
 * that a half NaN survives half -> float -> half. */
static uint16_t f16_from_inf_nan(uint32_t sign, uint32_t man)
{
  if (man == 0)
    return (uint16_t)(sign | F16_INF);
  return (uint16_t)(sign | F16_INF | F16_QUIET | (man >> MAN_DROP));
}

/* |f| below the smallest normal half: the significand, with its hidden
 * bit, is shifted down to units of 2^-24 and rounded once. */
static uint16_t f16_subnormal(uint32_t sign, uint32_t exp, uint32_t man)
{
  int half_exp = (int)exp - BIAS_DIFF; /* <= 0 here */
  if (half_exp < -10)
    return (uint16_t)sign; /* below 2^-25: rounds to zero */
  man |= F32_MAN_MASK + 1u;
  /* A round up to 0x400 is the smallest normal, which is what we want. */
  return (uint16_t)(sign | shift_round_even(man, (unsigned)(14 - half_exp)));
}

uint16_t tj_f32_to_f16(float f)
{
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> F32_MAN_BITS) & F32_EXP_MASK;
  uint32_t man = x & F32_MAN_MASK;

  if (exp == F32_EXP_MASK)
    return f16_from_inf_nan(sign, man);
  if ((int)exp - BIAS_DIFF >= 31)
    return (uint16_t)(sign | F16_INF);
  if ((int)exp - BIAS_DIFF <= 0)
    return f16_subnormal(sign, exp, man);
  /* Exponent and mantissa side by side, so that a carry out of the
   * rounded mantissa bumps the exponent (and 65520 becomes inf). */
  uint32_t both = ((exp - BIAS_DIFF) << F32_MAN_BITS) | man;
  return (uint16_t)(sign | shift_round_even(both, MAN_DROP));
}

/* Half subnormal: value man * 2^-24, renormalised for float. */
static uint32_t f32_from_subnormal(uint32_t sign, uint32_t man)
{
  unsigned top = 9; /* the highest set bit of man */
  while (!(man & (1u << top)))
    top--;
  uint32_t exp = top + 127u - 24u;
  uint32_t frac = (man << (F32_MAN_BITS - top)) & F32_MAN_MASK;
  return sign | (exp << F32_MAN_BITS) | frac;
}

float tj_f16_to_f32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & F16_MAN_MASK;

  if (exp == 0x1f) {
    uint32_t quiet = man ? F32_QUIET : 0u;
    return bits_float(sign | (F32_EXP_MASK << F32_MAN_BITS) | quiet |
                      (man << MAN_DROP));
  }
  if (exp == 0)
    return bits_float(man ? f32_from_subnormal(sign, man) : sign);
  return bits_float(sign | ((exp + BIAS_DIFF) << F32_MAN_BITS) |
                    (man << MAN_DROP));
}

float tj_bf16_to_f32(uint16_t h)
{
  return bits_float((uint32_t)h << 16);
}

uint16_t tj_f32_to_bf16(float f)
{
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, its top payload */
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even */
  return (uint16_t)(u >> 16);
}
