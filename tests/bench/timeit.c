/* timeit - run a command and report its wall time, CPU time and peak memory.
 *
 *   timeit [-m MS] RESULT_FILE COMMAND [ARG]...
 *
 * Writes one line "wall_s user_s sys_s maxrss_kib exit_status peak_pss_kib" to RESULT_FILE;
 * exits with the command's status. maxrss is the peak RSS of the largest single process among
 * the command and every descendant it waited for (as /usr/bin/time -v reports it). That
 * understates a multi-process program: rsync runs as three processes (sender, receiver,
 * generator), tar | tar as two. So with -m MS, the proportional set size (PSS: shared pages split
 * between the processes sharing them) of the command's whole process tree is summed every MS
 * milliseconds from /proc/PID/smaps_rollup, and the largest sum is reported (0 without -m). Why not measure from the harness itself: a child's ru_maxrss starts from the
 * high-water mark of the address space it was forked from, so a command started from a Python
 * process "peaks" at the interpreter's ~20 MB; started from this small program it starts at ~1 MB.
 * The wall time is taken around fork and wait, with CLOCK_MONOTONIC.
 *
 * Part of the treesync benchmark harness (tests/bench/run.sh); not run by the unit tests.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

static long read_small(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return (long)n;
}

/* PSS of `root` and all its descendants, in KiB (processes found via /proc/PID/task/TID/children). */
static long tree_pss_kib(pid_t root) {
  pid_t todo[1024];
  int n = 0;
  long total = 0;
  todo[n++] = root;
  while (n > 0) {
    const pid_t p = todo[--n];
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)p);
    if (read_small(path, buf, sizeof buf) > 0) {
      const char* pss = strstr(buf, "\nPss:");
      if (pss != NULL) total += strtol(pss + 5, NULL, 10);
    }
    snprintf(path, sizeof path, "/proc/%d/task", (int)p);
    DIR* tasks = opendir(path);
    if (tasks == NULL) continue;
    for (struct dirent* t; (t = readdir(tasks)) != NULL;) {
      if (t->d_name[0] == '.') continue;
      char cpath[300];
      snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", (int)p, t->d_name);
      if (read_small(cpath, buf, sizeof buf) <= 0) continue;
      for (char* s = buf; *s != '\0';) {
        char* end;
        const long child = strtol(s, &end, 10);
        if (end == s) break;
        if (n < (int)(sizeof todo / sizeof todo[0])) todo[n++] = (pid_t)child;
        s = end;
      }
    }
    closedir(tasks);
  }
  return total;
}

int main(int argc, char* argv[]) {
  long sample_ms = 0;
  if (argc > 2 && strcmp(argv[1], "-m") == 0) {
    sample_ms = strtol(argv[2], NULL, 10);
    argv += 2;
    argc -= 2;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: timeit [-m MS] RESULT_FILE COMMAND [ARG]...\n");
    return 125;
  }
  /* SIGCHLD is taken with sigtimedwait: the end is seen at once, samples are taken in between */
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
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
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "timeit: %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  long peak_pss = 0;
  if (sample_ms > 0) {
    const struct timespec every = {sample_ms / 1000, (sample_ms % 1000) * 1000000L};
    for (;;) {
      const long pss = tree_pss_kib(pid);
      if (pss > peak_pss) peak_pss = pss;
      if (sigtimedwait(&chld, NULL, &every) == SIGCHLD) break;
    }
  }
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "timeit: wait4: %s\n", strerror(errno));
      return 125;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  fprintf(out, "%.6f %.6f %.6f %ld %d %ld\n", wall, seconds(ru.ru_utime), seconds(ru.ru_stime), ru.ru_maxrss,
          code, peak_pss);
  fclose(out);
  return code;
}
