/* A tiny Armv9 program built with FlagTree's flags (-march=armv9-a+sve2+i8mm+bf16 -msve-vector-bits=128):
 * one instruction from each feature the recipe requires, and a loop written the usual SVE way whose step
 * GCC fixes at compile time (svcntw() is the constant 4 under -msve-vector-bits=128).
 *
 * On a CPU without SVE2/i8mm/bf16 it dies with SIGILL; on a CPU whose SVE vectors are not 128-bit it runs
 * to the end and prints WRONG numbers (the predicate covers the real vector length, the step does not):
 * the two failure modes doctor's cpu.features and cpu.sve-length predict. The inputs are derived from
 * argc so the compiler cannot fold them away; the test computes the expected output itself. */
#include <arm_sve.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 32

int main(int argc, char **argv) {
    (void)argv;
    int k = argc; /* 1 when run without arguments */

    int32_t a[N];
    for (int i = 0; i < N; i++) a[i] = i * k;
    for (int i = 0; i < N; i += (int)svcntw()) {
        svbool_t pg = svwhilelt_b32(i, N);
        svst1(pg, &a[i], svadd_x(pg, svld1(pg, &a[i]), 1000 * k));
    }
    long sum = 0;
    for (int i = 0; i < N; i++) sum += a[i];
    printf("add %ld\n", sum);

    /* SVE2: saturating rounding doubling multiply high */
    int32_t x[4] = {(1 << 30) * k, (1 << 29) * k, -(1 << 30) * k, 12345 * k};
    int32_t y[4] = {(1 << 30) * k, (1 << 30) * k, (1 << 30) * k, (1 << 20) * k};
    int32_t r[4];
    svbool_t p4 = svwhilelt_b32(0, 4);
    svst1(p4, r, svqrdmulh(svld1(p4, x), svld1(p4, y)));
    printf("sqrdmulh %d %d %d %d\n", r[0], r[1], r[2], r[3]);

    /* i8mm: a 2x8 by 8x2 int8 matrix multiply-accumulate into 2x2 int32 */
    int8_t m1[16], m2[16];
    for (int i = 0; i < 16; i++) {
        m1[i] = (int8_t)((i + 1) * k);
        m2[i] = (int8_t)(((i % 3) - 1) * k);
    }
    int32_t acc[4] = {0, 0, 0, 0};
    svbool_t p16 = svwhilelt_b8(0, 16);
    svst1(p4, acc, svmmla_s32(svld1(p4, acc), svld1(p16, m1), svld1(p16, m2)));
    printf("smmla %d %d %d %d\n", acc[0], acc[1], acc[2], acc[3]);

    /* bf16: pairwise dot products of bfloat16 values, accumulated in float */
    uint16_t bits1[8], bits2[8];
    for (int i = 0; i < 8; i++) {
        bits1[i] = (uint16_t)(0x3f80 + 0x80 * (i % 2) * k); /* 1.0, 2.0, 1.0, 2.0 ... */
        bits2[i] = (uint16_t)(0x4040 * k);                   /* 3.0 */
    }
    bfloat16_t b1[8], b2[8];
    memcpy(b1, bits1, sizeof b1);
    memcpy(b2, bits2, sizeof b2);
    svbool_t p8 = svwhilelt_b16(0, 8);
    float f[4];
    svst1(p4, f, svbfdot_f32(svdup_f32(0.0f), svld1(p8, b1), svld1(p8, b2)));
    printf("bfdot %g %g %g %g\n", f[0], f[1], f[2], f[3]);
    return 0;
}
