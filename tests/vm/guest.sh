#!/bin/sh
# PID 1 of the VMs that scripts/vmtest boots, user-mode-linux or qemu: the
# host's "/" is the root file system (read-only: hostfs under
# user-mode-linux, 9p under qemu, mounted by tests/vm/qemu-init.sh), so every
# host tool and the test binaries built on the host are here at their own
# paths. This sets up
# what a booted system has (proc, sys, tmpfs where tests write, kernel
# modules), runs the job that scripts/vmtest wrote, leaves each test's exit
# status in the job directory (the only host directory mounted writable)
# and powers off. Not meant to be run by hand.
#
# The kernel passes VMTEST_JOB (the job directory, shared by the VMs of one
# kind), VMTEST_VM (uml or qemu) and VMTEST_NAME (this VM, e.g. uml2) from
# its command line.
set -u
VMTEST_VM=${VMTEST_VM:-uml}
VMTEST_NAME=${VMTEST_NAME:-$VMTEST_VM}
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
# The host paths the job needs (VMTEST_KEEP, colon-separated: the
# checkout, cargo's target directory, the plugins; from scripts/vmtest)
# stay visible at their own paths when they lie under one of these: the
# host's directory is held at /dev/shm/vm-host while the tmpfs goes on,
# then each such path is bound back into the tmpfs (read-only, as the
# rest of the host's tree).
tmpfs_dirs="/run /tmp /var/tmp /var/lib/cni"
kept_under() { # dir: the VMTEST_KEEP paths strictly below it
    old_ifs=$IFS
    IFS=:
    for p in ${VMTEST_KEEP:-}; do
        case $p in "$1"/?*) echo "$p" ;; esac
    done
    IFS=$old_ifs
}
for d in $tmpfs_dirs; do
    [ -d "$d" ] || continue
    if [ -n "$(kept_under "$d")" ]; then
        mkdir -p "/dev/shm/vm-host$d"
        mount --bind "$d" "/dev/shm/vm-host$d"
    fi
    mount -t tmpfs tmpfs "$d"
done
for d in $tmpfs_dirs; do
    for p in $(kept_under "$d"); do
        mkdir -p "$p" && mount --bind "/dev/shm/vm-host$p" "$p" ||
            echo "vmtest: cannot keep the host's $p visible"
    done
    mountpoint -q "/dev/shm/vm-host$d" && umount -l "/dev/shm/vm-host$d"
done
# The job directory, writable: results go back to the host through it
# (under qemu, a second 9p share, tag "job").
if [ "$VMTEST_VM" = qemu ]; then
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job "$VMTEST_JOB"
else
    mount -t hostfs -o "$VMTEST_JOB" hostfs "$VMTEST_JOB"
fi || {
    echo "vmtest: cannot mount the job directory $VMTEST_JOB"
    halt
}

# Kernel modules: Debian's user-mode-linux keeps them in /usr/lib/uml/modules,
# not /lib/modules (which may not even exist on the host); a kernel that
# tests/vm/uml-kernel fetched has them beside it (VMTEST_UML_MODULES). A module tree
# under /run and a modprobe wrapper pointing at it serve both our explicit
# loads and the kernel's own on-demand loads (rtnl-link-*, nft-expr-*, ...).
# Debian's amd64 kernel (qemu) finds its own in the host's /lib/modules.
kver=$(uname -r)
if [ "$VMTEST_VM" = uml ]; then
    mkdir -p "/run/vm/lib/modules/$kver"
    mount --bind "${VMTEST_UML_MODULES:-/usr/lib/uml/modules}/$kver" "/run/vm/lib/modules/$kver"
    cat >/run/vm/modprobe <<EOF
#!/bin/sh
exec /sbin/modprobe -d /run/vm "\$@"
EOF
    chmod +x /run/vm/modprobe
    echo /run/vm/modprobe >/proc/sys/kernel/modprobe
    modprobe() { /run/vm/modprobe "$@"; }
    # Its IPv6 is a module too (ipv6.ko; built in for amd64): load it
    # before the check below, which is about IPv6 that fails to come up.
    modprobe ipv6 || echo "vmtest: modprobe ipv6 failed"
fi

ip link set lo up
# Every test needs IPv6 (built into Debian's kernels): say so at once if
# this boot came up without it, with what the kernel said.
if [ ! -d /proc/sys/net/ipv6 ]; then
    echo "vmtest: this kernel came up without IPv6 (/proc/sys/net/ipv6 missing):"
    dmesg | grep -i -e ipv6 -e 'error' | tail -20
fi
# Under qemu every instruction is emulated, and qemu reuses the code it
# translated only at the same virtual address: with address space
# randomisation each exec of ip, iptables or nft translates its libraries
# anew. Off, an exec costs 5-8 times less (ip link show: 550 -> 85 ms,
# nft list ruleset: 860 -> 120 ms). The VM is thrown away after the run.
[ "$VMTEST_VM" = qemu ] && echo 0 >/proc/sys/kernel/randomize_va_space

# The job: exports the tests' environment, loads modules and calls
# run_queue (or run_test for one binary).
# Each entry's exit status, seconds and VM: $VMTEST_JOB/results/<entry>.
run_test() { # entry name cwd executable [libtest args...]
    entry=$1 name=$2 dir=$3 exe=$4
    shift 4
    # The arguments show which tests this VM leaves out (--skip).
    echo "==== vmtest: $name $*"
    started=$(date +%s)
    (cd "$dir" && "$exe" "$@")
    code=$?
    took=$(($(date +%s) - started))
    mkdir -p "$VMTEST_JOB/results"
    echo "$code $took $VMTEST_NAME" >"$VMTEST_JOB/results/$entry"
    echo "==== vmtest: $name exited with $code after ${took}s"
}
# The entries in $VMTEST_JOB/queue (one run_test line each), in name order;
# each VM of this kind takes the next one no VM has claimed (mkdir is
# atomic on the host's file system, through hostfs and 9p alike), so the
# VMs stay busy until the queue is empty, however long each entry takes.
run_queue() {
    mkdir -p "$VMTEST_JOB/claims"
    for e in "$VMTEST_JOB"/queue/*; do
        mkdir "$VMTEST_JOB/claims/${e##*/}" 2>/dev/null || continue
        . "$e"
    done
}
load_modules() {
    for m in "$@"; do
        modprobe "$m" || echo "vmtest: modprobe $m failed"
    done
}

# Seconds since scripts/vmtest started the VMs: the boot's cost.
up=""
[ -f "$VMTEST_JOB/started" ] && up=", up after $(($(date +%s) - $(cat "$VMTEST_JOB/started")))s"
echo "==== vmtest: kernel $kver ($VMTEST_NAME$up)"
. "$VMTEST_JOB/job.sh"
mkdir -p "$VMTEST_JOB/finished"
date +%s >"$VMTEST_JOB/finished/$VMTEST_NAME"
halt
