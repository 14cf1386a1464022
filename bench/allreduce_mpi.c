/* The baseline of bench/allreduce_bench.cc: MPI_Allreduce (in place, float, sum) timed
 * the same way: 5 warm-up calls, rank 0 picks the number of back-to-back calls k that takes about
 * --rep-seconds and broadcasts it, each of --reps repetitions is barrier + k calls, the
 * median time per call is reported, busbw = algbw * 2(n-1)/n.
 *
 *   mpicc -O2 -o /tmp/allreduce_mpi bench/allreduce_mpi.c
 *   mpirun --allow-run-as-root -np 2 --mca pml ob1 --mca btl tcp,self /tmp/allreduce_mpi
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static size_t parse_size(const char* text) {
  char* end = NULL;
  double v = strtod(text, &end);
  if (*end == 'K') v *= 1024;
  if (*end == 'M') v *= 1024 * 1024;
  if (*end == 'G') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  size_t sizes[64];
  int nsizes = 0;
  int reps = 7, json = 0;
  double rep_seconds = 0.25;
  const char* label = "mpi";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      char* list = argv[++i];
      for (char* tok = strtok(list, ","); tok && nsizes < 64; tok = strtok(NULL, ","))
        sizes[nsizes++] = parse_size(tok);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--rep-seconds") && i + 1 < argc) {
      rep_seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
      label = argv[++i];
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else {
      if (rank == 0)
        fprintf(stderr,
                "usage: allreduce_mpi [--sizes 4K,1M,...] [--reps R] [--rep-seconds S] "
                "[--label NAME] [--json]\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (nsizes == 0)
    for (size_t s = 4 << 10; s <= (256u << 20); s *= 4) sizes[nsizes++] = s;

  if (rank == 0 && !json)
    printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
  double* times = malloc(sizeof(double) * (size_t)reps);
  for (int s = 0; s < nsizes; ++s) {
    size_t count = sizes[s] / sizeof(float);
    if (count == 0) count = 1;
    float* data = calloc(count, sizeof(float));

    /* A fixed warm-up count: every rank must make the same calls. */
    const int warm = 5;
    const double w0 = MPI_Wtime();
    for (int i = 0; i < warm; ++i)
      MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double per_call = (MPI_Wtime() - w0) / warm;
    long long k = (long long)(rep_seconds / per_call);
    if (k < 1) k = 1;
    MPI_Bcast(&k, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);

    for (int rep = 0; rep < reps; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (long long i = 0; i < k; ++i)
        MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      times[rep] = (MPI_Wtime() - t0) / (double)k;
    }
    qsort(times, (size_t)reps, sizeof(double), compare_double);
    const double t = times[reps / 2];
    const double bytes = (double)(count * sizeof(float));
    const double algbw = bytes / t / 1e9;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0) {
      if (json)
        printf(
            "{\"impl\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"calls\":%lld,\"reps\":%d,"
            "\"time_us\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f}\n",
            label, n, count * sizeof(float), k, reps, t * 1e6, algbw, busbw);
      else
        printf("%12zu %12.1f %12.3f %12.3f\n", count * sizeof(float), t * 1e6, algbw, busbw);
      fflush(stdout);
    }
    free(data);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
