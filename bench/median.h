/* The median of n timings (sorted in place), for the C benchmarks. */
#ifndef COPSE_BENCH_MEDIAN_H
#define COPSE_BENCH_MEDIAN_H
#include <stdlib.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}
static double median(double* t, int n) {
  qsort(t, (size_t)n, sizeof *t, by_value);
  return t[n / 2];
}

#endif
