#!/bin/sh
# PID 1 of the user-mode-linux VM that scripts/vmtest boots: the host's "/"
# is the root file system (hostfs, read-only), so every host tool and the
# test binaries built on the host are here at their own paths. This sets up
# what a booted system has (proc, sys, tmpfs where tests write, kernel
# modules), runs the job that scripts/vmtest wrote, leaves each test's exit
# status in the job directory (the only host directory mounted writable)
# and powers off. Not meant to be run by hand.
#
# The kernel passes VMTEST_JOB (the job directory) from its command line.
set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HOME=/root
export PATH HOME

halt() {
    sync
    poweroff -f >/dev/null 2>&1
    echo o >/proc/sysrq-trigger
    sleep 10
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm 2>/dev/null
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
# Where the tests and the tools they run write: /run (netns mounts,
# xtables.lock), /tmp (the tests' temporary directories), host-local's
# default data directory. tmpfs, so nothing reaches the host.
for d in /run /tmp /var/tmp /var/lib/cni; do
    [ -d "$d" ] && mount -t tmpfs tmpfs "$d"
done
# The job directory, writable: results go back to the host through it.
mount -t hostfs -o "$VMTEST_JOB" hostfs "$VMTEST_JOB" || {
    echo "vmtest: cannot mount the job directory $VMTEST_JOB"
    halt
}

# Kernel modules: Debian's user-mode-linux keeps them in /usr/lib/uml/modules,
# not /lib/modules (which may not even exist on the host). A module tree
# under /run and a modprobe wrapper pointing at it serve both our explicit
# loads and the kernel's own on-demand loads (rtnl-link-*, nft-expr-*, ...).
kver=$(uname -r)
mkdir -p "/run/vm/lib/modules/$kver"
mount --bind "/usr/lib/uml/modules/$kver" "/run/vm/lib/modules/$kver"
cat >/run/vm/modprobe <<EOF
#!/bin/sh
exec /sbin/modprobe -d /run/vm "\$@"
EOF
chmod +x /run/vm/modprobe
echo /run/vm/modprobe >/proc/sys/kernel/modprobe
modprobe() { /run/vm/modprobe "$@"; }

ip link set lo up

# The job: sets VMTEST_MODULES, exports the tests' environment and calls
# run_test for each test binary.
run_test() { # name cwd executable [libtest args...]
    name=$1 dir=$2 exe=$3
    shift 3
    # The arguments show which tests this VM leaves out (--skip).
    echo "==== vmtest: $name $*"
    (cd "$dir" && "$exe" "$@")
    code=$?
    echo "$code $name" >>"$VMTEST_JOB/results"
    echo "==== vmtest: $name exited with $code"
}
load_modules() {
    for m in "$@"; do
        modprobe "$m" || echo "vmtest: modprobe $m failed"
    done
}

echo "==== vmtest: kernel $kver (user-mode-linux)"
: >"$VMTEST_JOB/results"
. "$VMTEST_JOB/job.sh"
echo done >"$VMTEST_JOB/finished"
halt
