// The cgroup attach stall (src/cgroups/warm.rs), measured: how long moving this process into a
// cgroup (a write of its pid to cgroup.procs) takes after an idle pause, alone and with a
// warm-up write by a child process LEAD ms earlier (the child moves itself into the other test
// cgroup: a write that takes the same cgroup_threadgroup_rwsem). scripts/cgroup-stall/run-vm
// runs it in the cgroup v2 VM.
// Usage: cgstall CGROUP_DIR IDLE_MS LEAD_MS(-1: no warm-up) N
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void write_pid(const char *dir, pid_t pid) {
  char path[512], buf[32];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  int fd = open(path, O_WRONLY);
  if (fd < 0) { perror(path); exit(1); }
  int n = snprintf(buf, sizeof buf, "%d", pid);
  if (write(fd, buf, n) < 0) { perror("write"); }
  close(fd);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage\n"); return 2; }
  const char *base = argv[1];
  int idle = atoi(argv[2]), lead = atoi(argv[3]), n = atoi(argv[4]);
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/stall-a", base);
  snprintf(b, sizeof b, "%s/stall-b", base);
  mkdir(a, 0755);
  mkdir(b, 0755);
  double *xs = calloc(n, sizeof(double));
  for (int i = 0; i < n; i++) {
    usleep(idle * 1000);
    if (lead >= 0) {
      pid_t c = fork();
      if (c == 0) {  // pre-warm: a no-op move of the child into its own cgroup
        write_pid(i % 2 ? b : a, getpid());
        _exit(0);
      }
      usleep(lead * 1000);
      double t = now_ms();
      write_pid(i % 2 ? a : b, getpid());
      xs[i] = now_ms() - t;
      waitpid(c, NULL, 0);
    } else {
      double t = now_ms();
      write_pid(i % 2 ? a : b, getpid());
      xs[i] = now_ms() - t;
    }
  }
  write_pid(base, getpid());
  rmdir(a);
  rmdir(b);
  qsort(xs, n, sizeof(double), cmp);
  printf("RESULT idle %d ms, prewarm lead %d ms: median %.2f ms, min %.2f, max %.2f (n=%d)\n",
         idle, lead, xs[n / 2], xs[0], xs[n - 1], n);
  return 0;
}
