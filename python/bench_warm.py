# Warm no-op timing for README (section Python): treesync.sync / sync_tree in process, python -c, the CLI,
# and shutil.rmtree + copytree.  usage: python bench_warm.py SRC CLI   (run in a scratch directory)
import os, shutil, subprocess, sys, time, statistics
import treesync
src, cli = sys.argv[1], sys.argv[2]
N = 15
def best(f, n=N):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)
treesync.sync(src, "dst-py", jobs=4); subprocess.run([cli, "-q", "--delete", "-j4", src + "/", "dst-cli"], check=True)
py = best(lambda: treesync.sync(src, "dst-py", jobs=4))
py_tree = best(lambda: treesync.sync_tree(src, "dst-py"))
py_proc = best(lambda: subprocess.run([sys.executable, "-c", "import treesync, sys; treesync.sync(sys.argv[1], sys.argv[2], jobs=4)", src, "dst-py"], check=True))
c = best(lambda: subprocess.run([cli, "-q", "--delete", "-j4", src + "/", "dst-cli"], check=True))
def copytree():
    shutil.rmtree("dst-ct", ignore_errors=True)
    shutil.copytree(src, "dst-ct")
ct = best(copytree, 5)
for name, v in [("python sync jobs=4 (in process)", py), ("python sync_tree (in process)", py_tree), ("python -c sync (whole process)", py_proc), ("CLI -j4 (whole process)", c), ("rmtree+copytree", ct)]:
    print("%-34s min %.4f s  median %.4f s" % (name, v[0], v[1]))
print("python/CLI (min): %.2f   copytree/python: %.1f" % (py[0] / c[0], ct[0] / py[0]))
