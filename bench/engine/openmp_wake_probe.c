// What an OpenMP parallel region costs after the team has been idle for a while: the price of a
// worker that went to sleep (docs/engine.md, "Threads"). A 2-thread team runs an empty region
// after a busy gap of 1-160 us; while the gap is shorter than the workers' spin, the region costs
// well under a microsecond, and once they sleep it costs a futex wake-up.
//
//   gcc -O2 -fopenmp bench/engine/openmp_wake_probe.c -o /tmp/openmp_wake_probe
//   OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=1000 /tmp/openmp_wake_probe
//   OMP_WAIT_POLICY=PASSIVE /tmp/openmp_wake_probe
#include <omp.h>
#include <stdio.h>
#include <time.h>

static double NowSeconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  static const double kGapsUs[] = {1, 5, 10, 20, 40, 80, 160};
  const int kRegions = 3000;
  volatile int sink = 0;
  omp_set_num_threads(2);
  for (size_t g = 0; g < sizeof(kGapsUs) / sizeof(kGapsUs[0]); ++g) {
    double total = 0;
    for (int r = 0; r < kRegions; ++r) {
      const double gap_start = NowSeconds();
      while (NowSeconds() - gap_start < kGapsUs[g] * 1e-6) {
      }
      const double start = NowSeconds();
#pragma omp parallel
      { sink = sink + 1; }
      total += NowSeconds() - start;
    }
    printf("gap %5.0f us: region %6.2f us\n", kGapsUs[g], total / kRegions * 1e6);
  }
  return 0;
}
