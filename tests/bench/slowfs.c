/* slowfs - a FUSE passthrough that waits a fixed time in every request: a stand-in for a network
 * filesystem (NFS, Lustre, GPFS), where each metadata call is a round trip to a server.
 *
 *   slowfs BACKING_DIR MOUNTPOINT [-o delay_us=50] [-o max_threads=64] [FUSE options]
 *   fusermount3 -u MOUNTPOINT
 *
 * Every operation the kernel sends (lookup/getattr, readdir, open, create, read, write, setattr,
 * rename, unlink, ...) sleeps delay_us microseconds, then does the real work on BACKING_DIR.
 * Attribute, entry and negative lookups are never cached by the kernel (all timeouts 0), so a
 * program pays the latency for every stat, as on a filesystem with close-to-open consistency and
 * no attribute cache. Requests run on libfuse's worker threads, so concurrent callers overlap
 * their waits the way concurrent RPCs to a server do; only concurrency beats requests x latency.
 *
 * With -o stats=FILE, the number of requests of each kind is written to FILE at unmount.
 *
 * Part of the treesync benchmark harness (tests/bench/run.sh); not built or run by the unit tests.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* request counters, by kind: one per callback below */
#define SLOW_OPS(X)                                                                                  \
  X(getattr) X(access) X(readlink) X(opendir) X(readdir) X(releasedir) X(mknod) X(mkdir) X(unlink) \
  X(rmdir) X(symlink) X(rename) X(link) X(chmod) X(chown) X(truncate) X(utimens) X(create) X(open)  \
  X(read) X(write) X(statfs) X(flush) X(release) X(fsync) X(fallocate) X(copy_file_range) X(lseek)
#define SLOW_ENUM(name) op_##name,
enum { SLOW_OPS(SLOW_ENUM) op_count };
#define SLOW_NAME(name) #name,
static const char* const op_names[] = {SLOW_OPS(SLOW_NAME)};

static struct {
  unsigned delay_us;  /* per request */
  int root;           /* O_PATH handle on the backing directory; every call is relative to it */
  const char* stats;  /* where to write the request counts at unmount, or NULL */
  unsigned long counts[op_count];
} slow = {50, -1, NULL, {0}};

struct slowfs_options {
  unsigned delay_us;
  const char* stats;
  int show_help;
};

static const struct fuse_opt option_spec[] = {
    {"delay_us=%u", offsetof(struct slowfs_options, delay_us), 0},
    {"stats=%s", offsetof(struct slowfs_options, stats), 0},
    {"-h", offsetof(struct slowfs_options, show_help), 1},
    {"--help", offsetof(struct slowfs_options, show_help), 1},
    FUSE_OPT_END};

/* The round trip. Timer slack is set to 1 ns in main() (threads inherit it), so a 50 us sleep
 * lasts about 50 us and not the default slack's extra 50 us. */
static void round_trip(int op) {
  __atomic_fetch_add(&slow.counts[op], 1, __ATOMIC_RELAXED);
  if (slow.delay_us == 0) return;
  struct timespec ts = {slow.delay_us / 1000000u, (long)(slow.delay_us % 1000000u) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* FUSE paths are absolute ("/a/b"); the backing calls are relative to slow.root. */
static const char* rel(const char* path) { return path[1] != '\0' ? path + 1 : "."; }

#define RETURN_ERRNO_IF(cond) \
  do {                        \
    if (cond) return -errno;  \
  } while (0)

static void* slow_init(struct fuse_conn_info* conn, struct fuse_config* cfg) {
  (void)conn;
  cfg->use_ino = 1;          /* real inode numbers: tools that compare dev+ino see the truth */
  cfg->hard_remove = 1;      /* unlink really unlinks (no .fuse_hidden files) */
  cfg->entry_timeout = 0;    /* no dentry cache: every path component is looked up */
  cfg->attr_timeout = 0;     /* no attribute cache: every stat is a request */
  cfg->negative_timeout = 0; /* "does not exist" is asked again too */
  cfg->kernel_cache = 0;
  return NULL;
}

static void slow_destroy(void* private_data) {
  (void)private_data;
  if (slow.stats == NULL) return;
  FILE* f = fopen(slow.stats, "w");
  if (f == NULL) return;
  unsigned long total = 0;
  for (int i = 0; i < op_count; ++i) {
    if (slow.counts[i] != 0) fprintf(f, "%s %lu\n", op_names[i], slow.counts[i]);
    total += slow.counts[i];
  }
  fprintf(f, "total %lu\n", total);
  fclose(f);
}

static int slow_getattr(const char* path, struct stat* st, struct fuse_file_info* fi) {
  round_trip(op_getattr);
  if (fi != NULL) RETURN_ERRNO_IF(fstat((int)fi->fh, st) != 0);
  else RETURN_ERRNO_IF(fstatat(slow.root, rel(path), st, AT_SYMLINK_NOFOLLOW) != 0);
  return 0;
}

static int slow_access(const char* path, int mask) {
  round_trip(op_access);
  RETURN_ERRNO_IF(faccessat(slow.root, rel(path), mask, 0) != 0);
  return 0;
}

static int slow_readlink(const char* path, char* buf, size_t size) {
  round_trip(op_readlink);
  if (size == 0) return -EINVAL;
  ssize_t n = readlinkat(slow.root, rel(path), buf, size - 1);
  RETURN_ERRNO_IF(n < 0);
  buf[n] = '\0';
  return 0;
}

static int slow_opendir(const char* path, struct fuse_file_info* fi) {
  round_trip(op_opendir);
  int fd = openat(slow.root, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  RETURN_ERRNO_IF(fd < 0);
  DIR* d = fdopendir(fd);
  if (d == NULL) {
    int e = errno;
    close(fd);
    return -e;
  }
  fi->fh = (uint64_t)(uintptr_t)d;
  return 0;
}

/* One READDIR request: the whole listing, with inode numbers and d_type (no attributes). */
static int slow_readdir(const char* path, void* buf, fuse_fill_dir_t filler, off_t offset,
                        struct fuse_file_info* fi, enum fuse_readdir_flags flags) {
  (void)path;
  (void)flags;
  round_trip(op_readdir);
  DIR* d = (DIR*)(uintptr_t)fi->fh;
  if (offset == 0) rewinddir(d);
  for (;;) {
    errno = 0;
    struct dirent* e = readdir(d);
    if (e == NULL) {
      if (errno != 0) return -errno;
      break;
    }
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = e->d_ino;
    st.st_mode = (mode_t)(DTTOIF(e->d_type));
    if (filler(buf, e->d_name, &st, 0, (enum fuse_fill_dir_flags)0) != 0) break;
  }
  return 0;
}

static int slow_releasedir(const char* path, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_releasedir);
  closedir((DIR*)(uintptr_t)fi->fh);
  return 0;
}

static int slow_mknod(const char* path, mode_t mode, dev_t rdev) {
  round_trip(op_mknod);
  RETURN_ERRNO_IF(mknodat(slow.root, rel(path), mode, rdev) != 0);
  return 0;
}

static int slow_mkdir(const char* path, mode_t mode) {
  round_trip(op_mkdir);
  RETURN_ERRNO_IF(mkdirat(slow.root, rel(path), mode) != 0);
  return 0;
}

static int slow_unlink(const char* path) {
  round_trip(op_unlink);
  RETURN_ERRNO_IF(unlinkat(slow.root, rel(path), 0) != 0);
  return 0;
}

static int slow_rmdir(const char* path) {
  round_trip(op_rmdir);
  RETURN_ERRNO_IF(unlinkat(slow.root, rel(path), AT_REMOVEDIR) != 0);
  return 0;
}

static int slow_symlink(const char* target, const char* path) {
  round_trip(op_symlink);
  RETURN_ERRNO_IF(symlinkat(target, slow.root, rel(path)) != 0);
  return 0;
}

static int slow_rename(const char* from, const char* to, unsigned int flags) {
  round_trip(op_rename);
  RETURN_ERRNO_IF(renameat2(slow.root, rel(from), slow.root, rel(to), flags) != 0);
  return 0;
}

static int slow_link(const char* from, const char* to) {
  round_trip(op_link);
  RETURN_ERRNO_IF(linkat(slow.root, rel(from), slow.root, rel(to), 0) != 0);
  return 0;
}

static int slow_chmod(const char* path, mode_t mode, struct fuse_file_info* fi) {
  round_trip(op_chmod);
  if (fi != NULL) RETURN_ERRNO_IF(fchmod((int)fi->fh, mode) != 0);
  else RETURN_ERRNO_IF(fchmodat(slow.root, rel(path), mode, 0) != 0);
  return 0;
}

static int slow_chown(const char* path, uid_t uid, gid_t gid, struct fuse_file_info* fi) {
  round_trip(op_chown);
  if (fi != NULL) RETURN_ERRNO_IF(fchown((int)fi->fh, uid, gid) != 0);
  else RETURN_ERRNO_IF(fchownat(slow.root, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) != 0);
  return 0;
}

static int slow_truncate(const char* path, off_t size, struct fuse_file_info* fi) {
  round_trip(op_truncate);
  if (fi != NULL) {
    RETURN_ERRNO_IF(ftruncate((int)fi->fh, size) != 0);
    return 0;
  }
  int fd = openat(slow.root, rel(path), O_WRONLY | O_CLOEXEC);
  RETURN_ERRNO_IF(fd < 0);
  int r = ftruncate(fd, size) != 0 ? -errno : 0;
  close(fd);
  return r;
}

static int slow_utimens(const char* path, const struct timespec ts[2], struct fuse_file_info* fi) {
  round_trip(op_utimens);
  if (fi != NULL) RETURN_ERRNO_IF(futimens((int)fi->fh, ts) != 0);
  else RETURN_ERRNO_IF(utimensat(slow.root, rel(path), ts, AT_SYMLINK_NOFOLLOW) != 0);
  return 0;
}

static int slow_create(const char* path, mode_t mode, struct fuse_file_info* fi) {
  round_trip(op_create);
  int fd = openat(slow.root, rel(path), fi->flags | O_CLOEXEC, mode);
  RETURN_ERRNO_IF(fd < 0);
  fi->fh = (uint64_t)fd;
  return 0;
}

static int slow_open(const char* path, struct fuse_file_info* fi) {
  round_trip(op_open);
  int fd = openat(slow.root, rel(path), fi->flags | O_CLOEXEC);
  RETURN_ERRNO_IF(fd < 0);
  fi->fh = (uint64_t)fd;
  return 0;
}

static int slow_read(const char* path, char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_read);
  ssize_t n = pread((int)fi->fh, buf, size, off);
  RETURN_ERRNO_IF(n < 0);
  return (int)n;
}

static int slow_write(const char* path, const char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_write);
  ssize_t n = pwrite((int)fi->fh, buf, size, off);
  RETURN_ERRNO_IF(n < 0);
  return (int)n;
}

static int slow_statfs(const char* path, struct statvfs* st) {
  (void)path;
  round_trip(op_statfs);
  RETURN_ERRNO_IF(fstatvfs(slow.root, st) != 0);
  return 0;
}

static int slow_flush(const char* path, struct fuse_file_info* fi) {
  (void)path;
  (void)fi;
  round_trip(op_flush); /* close-to-open: a close is a round trip on NFS too */
  return 0;
}

static int slow_release(const char* path, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_release);
  close((int)fi->fh);
  return 0;
}

static int slow_fsync(const char* path, int datasync, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_fsync);
  RETURN_ERRNO_IF((datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) != 0);
  return 0;
}

static int slow_fallocate(const char* path, int mode, off_t off, off_t len, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_fallocate);
  RETURN_ERRNO_IF(fallocate((int)fi->fh, mode, off, len) != 0);
  return 0;
}

/* A server-side copy (NFS 4.2 COPY): one request, the data never crosses the "network". */
static ssize_t slow_copy_file_range(const char* path_in, struct fuse_file_info* fi_in, off_t off_in,
                                    const char* path_out, struct fuse_file_info* fi_out, off_t off_out,
                                    size_t len, int flags) {
  (void)path_in;
  (void)path_out;
  round_trip(op_copy_file_range);
  ssize_t n = copy_file_range((int)fi_in->fh, &off_in, (int)fi_out->fh, &off_out, len, (unsigned)flags);
  RETURN_ERRNO_IF(n < 0);
  return n;
}

static off_t slow_lseek(const char* path, off_t off, int whence, struct fuse_file_info* fi) {
  (void)path;
  round_trip(op_lseek);
  off_t r = lseek((int)fi->fh, off, whence);
  RETURN_ERRNO_IF(r < 0);
  return r;
}

static const struct fuse_operations slow_ops = {
    .getattr = slow_getattr,
    .readlink = slow_readlink,
    .mknod = slow_mknod,
    .mkdir = slow_mkdir,
    .unlink = slow_unlink,
    .rmdir = slow_rmdir,
    .symlink = slow_symlink,
    .rename = slow_rename,
    .link = slow_link,
    .chmod = slow_chmod,
    .chown = slow_chown,
    .truncate = slow_truncate,
    .open = slow_open,
    .read = slow_read,
    .write = slow_write,
    .statfs = slow_statfs,
    .flush = slow_flush,
    .release = slow_release,
    .fsync = slow_fsync,
    .opendir = slow_opendir,
    .readdir = slow_readdir,
    .releasedir = slow_releasedir,
    .init = slow_init,
    .destroy = slow_destroy,
    .access = slow_access,
    .create = slow_create,
    .utimens = slow_utimens,
    .fallocate = slow_fallocate,
    .copy_file_range = slow_copy_file_range,
    .lseek = slow_lseek,
};

static void usage(const char* prog) {
  printf("usage: %s BACKING_DIR MOUNTPOINT [options]\n"
         "A FUSE passthrough of BACKING_DIR that waits in every request (a network filesystem stand-in).\n"
         "    -o delay_us=N      microseconds per request (default 50)\n"
         "    -o max_threads=N   libfuse worker threads, i.e. requests in flight (default 10)\n"
         "    -o stats=FILE      (absolute path) write the number of requests of each kind to FILE at unmount\n\n",
         prog);
}

int main(int argc, char* argv[]) {
  /* BACKING_DIR is ours; everything after it goes to libfuse. */
  if (argc < 2 || argv[1][0] == '-') {
    usage(argv[0]);
    struct fuse_args help = FUSE_ARGS_INIT(0, NULL);
    fuse_opt_add_arg(&help, argv[0]);
    fuse_opt_add_arg(&help, "--help");
    fuse_main(help.argc, help.argv, &slow_ops, NULL);
    return argc < 2 ? 1 : 0;
  }
  slow.root = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (slow.root < 0) {
    fprintf(stderr, "slowfs: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }

  struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
  fuse_opt_add_arg(&args, argv[0]);
  for (int i = 2; i < argc; ++i) fuse_opt_add_arg(&args, argv[i]);
  struct slowfs_options opts = {50, NULL, 0};
  if (fuse_opt_parse(&args, &opts, option_spec, NULL) == -1) return 1;
  if (opts.show_help) {
    usage(argv[0]);
    fuse_opt_add_arg(&args, "--help");
  }
  slow.delay_us = opts.delay_us;
  slow.stats = opts.stats; /* absolute: the daemon changes to / */

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* inherited by libfuse's worker threads */
  int r = fuse_main(args.argc, args.argv, &slow_ops, NULL);
  fuse_opt_free_args(&args);
  return r;
}
