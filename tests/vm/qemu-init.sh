#!/bin/busybox sh
# /init of the initramfs that scripts/vmtest boots Debian's amd64 kernel
# with under qemu: loads virtio and 9p (modules in Debian's kernel), mounts
# the host's "/" (shared read-only over 9p, tag "hostroot") and hands over
# to tests/vm/guest.sh there, which is the same PID 1 as under
# user-mode-linux. The kernel passes VMTEST_* from its command line in the
# environment, which switch_root keeps. Not meant to be run by hand.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
fail() {
    echo "vmtest: $*"
    echo o >/proc/sysrq-trigger
    sleep 10
}
# The modules in load order (scripts/vmtest copied them here).
for m in $(cat /modules.order); do
    insmod "/modules/$m.ko" || fail "insmod $m failed"
done
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /newroot ||
    fail "cannot mount the host's / over 9p"
umount /proc /dev
exec switch_root /newroot "$VMTEST_GUEST_INIT"
