/* timeit - run a command and report its wall time, CPU time and peak RSS.
 *
 *   timeit RESULT_FILE COMMAND [ARG]...
 *
 * Writes one line "wall_s user_s sys_s maxrss_kib exit_status" to RESULT_FILE; exits with the
 * command's status. The peak RSS is the largest of the command and every descendant it waited
 * for (as /usr/bin/time -v reports it), so a pipeline run through `sh -c` reports its largest
 * process. Why not measure from the harness itself: a child's ru_maxrss starts from the
 * high-water mark of the address space it was forked from, so a command started from a Python
 * process "peaks" at the interpreter's ~20 MB; started from this small program it starts at ~1 MB.
 * The wall time is taken around fork and wait, with CLOCK_MONOTONIC.
 *
 * Part of the treesync benchmark harness (tests/bench/run.sh); not run by the unit tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

int main(int argc, char* argv[]) {
  if (argc < 3) {
    fprintf(stderr, "usage: timeit RESULT_FILE COMMAND [ARG]...\n");
    return 125;
  }
  FILE* out = fopen(argv[1], "w");
  if (out == NULL) {
    fprintf(stderr, "timeit: %s: %s\n", argv[1], strerror(errno));
    return 125;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "timeit: fork: %s\n", strerror(errno));
    return 125;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    fprintf(stderr, "timeit: %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "timeit: wait4: %s\n", strerror(errno));
      return 125;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  fprintf(out, "%.6f %.6f %.6f %ld %d\n", wall, seconds(ru.ru_utime), seconds(ru.ru_stime), ru.ru_maxrss, code);
  fclose(out);
  return code;
}
