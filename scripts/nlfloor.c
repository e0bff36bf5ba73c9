/* The netlink floor of scripts/bench (issue 30): the smallest static
 * process doing a row's kernel work, its netlink requests, tun ioctls and
 * file work (host-local's reservation, a sysctl, a saved state file) (no
 * C library: its own system calls, so its start-up is the spawn floor's).
 * scripts/bench builds it with gcc and times it whole: no tool start-up
 * to subtract. stdin is a list of records made by the
 * bench's class Nl, each: u32 length (all of it), u32 op,
 * u32 a, u32 b, then data:
 *   1 OPEN   a=open flags, b=mode (with O_CREAT), data=path (NUL-terminated);
 *            the fd takes the next slot
 *   2 ENTER  setns(slot a, CLONE_NEWNET); later messages go on a new socket there
 *   3 MSG    a=slot to store the answer's ifindex in (~0: none), b=patches;
 *            data = b x (u32 offset, u32 slot): the message's u32 at offset
 *            becomes the slot's value; then one netlink request, sent and its
 *            answer read (the ACK, or the first answer of a GET without ACK)
 *   4 IOCTL  ioctl(slot a, b, pointer to data)
 *   5 IOCTLV ioctl(slot a, b, the u32 in data)
 *   6 CLOSE  close(slot a)
 *   7 WRITE  pwrite(slot a, data, offset 0): all of it in one call (a file's
 *            content, a sysctl)
 *   8 FLOCK  flock(slot a, b) (host-local's lock file)
 *   9 READ   read(slot a, up to b bytes) once (a file's content; what was
 *            read is not used: the kernel's work is the floor's)
 *  10 UNLINK unlinkat(AT_FDCWD, data = path (NUL-terminated), 0) (host-local's
 *            release of a reservation)
 *  11 NFBATCH data = an nf_tables batch (begin, requests, end), sent as is
 *            on a NETLINK_NETFILTER socket (one per namespace, as the
 *            netlink one); answers read until the NLMSG_ERROR of seq a
 *            (the ACK of the request that asked for one)
 *  12 SETTLE membarrier(MEMBARRIER_CMD_GLOBAL): an RCU grace period waited
 *            for, as the plugins do after deleting rules (cni_fw::settle:
 *            firewall and portmap always, bridge in a crowd)
 * Exits 0, or 1 with "nlfloor: record R error E" on stderr. */
#if defined(__x86_64__)
enum { S_READ = 0, S_WRITE = 1, S_CLOSE = 3, S_PWRITE = 18, S_IOCTL = 16, S_FLOCK = 73, S_SOCKET = 41, S_SENDTO = 44,
       S_RECVFROM = 45, S_EXIT = 60, S_OPENAT = 257, S_SETNS = 308, S_UNLINKAT = 263, S_MEMBARRIER = 324 };
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
    long r;
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}
#elif defined(__aarch64__)
enum { S_READ = 63, S_WRITE = 64, S_CLOSE = 57, S_PWRITE = 68, S_IOCTL = 29, S_FLOCK = 32, S_SOCKET = 198, S_SENDTO = 206,
       S_RECVFROM = 207, S_EXIT = 93, S_OPENAT = 56, S_SETNS = 268, S_UNLINKAT = 35, S_MEMBARRIER = 283 };
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b,
        x2 __asm__("x2") = c, x3 __asm__("x3") = d, x4 __asm__("x4") = e, x5 __asm__("x5") = f;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#else
#error no system calls for this architecture
#endif
typedef unsigned int u32;
static unsigned char in[1 << 16], ans[1 << 16];
static u32 slot[64];
static u32 nslots;

static void put(const char *s, long n) { sys6(S_WRITE, 2, (long)s, n, 0, 0, 0); }
static void fail(u32 rec, long err) {
    char msg[64] = "nlfloor: record ", *p = msg + 16, num[24];
    long v[2] = {rec, err < 0 ? -err : err};
    for (int k = 0; k < 2; k++) {
        int i = 0;
        do num[i++] = '0' + v[k] % 10; while (v[k] /= 10);
        while (i) *p++ = num[--i];
        if (!k) { const char *t = " error "; while (*t) *p++ = *t++; }
    }
    *p++ = '\n';
    put(msg, p - msg);
    sys6(S_EXIT, 1, 0, 0, 0, 0, 0);
}
static u32 rd(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (u32)p[3] << 24; }
static void wr(unsigned char *p, u32 v) { p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24; }

/* Sends the request(s) `m` on `sock`, then reads answers until the one of
 * `seq` ends the exchange: its NLMSG_ERROR (an error answering any request
 * fails the record), its NLMSG_DONE, or, without NLM_F_ACK (`ack` 0), its
 * answer, an RTM_NEWLINK's ifindex stored in slot `store` (~0: none). */
static void exchange(long sock, const unsigned char *m, u32 mlen, u32 seq, u32 ack, u32 store, u32 rec) {
    long r;
    if ((r = sys6(S_SENDTO, sock, (long)m, mlen, 0, 0, 0)) < 0) fail(rec, r);
    for (int done = 0; !done;) {
        if ((r = sys6(S_RECVFROM, sock, (long)ans, sizeof ans, 0, 0, 0)) < 0) fail(rec, r);
        for (long p = 0; p + 16 <= r;) {
            unsigned char *q = ans + p;
            u32 ql = rd(q), qt = q[4] | q[5] << 8;
            if (ql < 16) break;
            p += (ql + 3) & ~3u;
            if (qt == 2 && rd(q + 16)) fail(rec, (int)rd(q + 16)); /* NLMSG_ERROR */
            if (rd(q + 8) != seq) continue;
            if (qt == 2 || qt == 3) { /* its ACK, NLMSG_DONE */
                done = 1;
            } else {
                if (store < 64 && qt == 16) slot[store] = rd(q + 20); /* RTM_NEWLINK */
                if (!ack) done = 1; /* the answer ends it */
            }
        }
    }
}

#if defined(__x86_64__)
/* The entry point gets a stack aligned as at a call, not after one. */
__attribute__((force_align_arg_pointer))
#endif
void _start(void) {
    long n = 0, r, sock = -1, nfsock = -1;
    u32 seq = 0;
    while ((r = sys6(S_READ, 0, (long)in + n, sizeof in - n, 0, 0, 0)) > 0) n += r;
    for (long at = 0, rec = 0; at + 16 <= n; rec++) {
        unsigned char *h = in + at, *d = h + 16;
        u32 len = rd(h), op = rd(h + 4), a = rd(h + 8), b = rd(h + 12);
        if (len < 16 || at + len > n) fail(rec, 22);
        at += (len + 3) & ~3u;
        if (op == 1) {
            r = sys6(S_OPENAT, -100, (long)d, a | 02000000, b, 0, 0);
            if (r < 0 || nslots == 64) fail(rec, r);
            slot[nslots++] = r;
        } else if (op == 2) {
            if ((r = sys6(S_SETNS, slot[a], 0x40000000, 0, 0, 0, 0)) < 0) fail(rec, r);
            sock = nfsock = -1;
        } else if (op == 3) {
            unsigned char *m = d + 8 * b;
            for (u32 k = 0; k < b; k++) wr(m + rd(d + 8 * k), slot[rd(d + 8 * k + 4)]);
            if (sock < 0) {
                sock = sys6(S_SOCKET, 16, 3 | 02000000, 0, 0, 0, 0); /* AF_NETLINK, SOCK_RAW */
                if (sock < 0) fail(rec, sock);
            }
            wr(m + 8, ++seq);
            exchange(sock, m, rd(m), seq, (m[6] | m[7] << 8) & 4, a, rec);
        } else if (op == 11) {
            if (nfsock < 0) {
                nfsock = sys6(S_SOCKET, 16, 3 | 02000000, 12, 0, 0, 0); /* NETLINK_NETFILTER */
                if (nfsock < 0) fail(rec, nfsock);
            }
            exchange(nfsock, d, len - 16, a, 4, ~0u, rec);
        } else if (op == 12) {
            if ((r = sys6(S_MEMBARRIER, 1, 0, 0, 0, 0, 0)) < 0) fail(rec, r);
        } else if (op == 6) {
            if ((r = sys6(S_CLOSE, slot[a], 0, 0, 0, 0, 0)) < 0) fail(rec, r);
        } else if (op == 7) {
            if ((r = sys6(S_PWRITE, slot[a], (long)d, len - 16, 0, 0, 0)) != (long)(len - 16))
                fail(rec, r < 0 ? r : 5);
        } else if (op == 8) {
            if ((r = sys6(S_FLOCK, slot[a], b, 0, 0, 0, 0)) < 0) fail(rec, r);
        } else if (op == 9) {
            if ((r = sys6(S_READ, slot[a], (long)ans, b < sizeof ans ? b : sizeof ans, 0, 0, 0)) < 0)
                fail(rec, r);
        } else if (op == 10) {
            if ((r = sys6(S_UNLINKAT, -100, (long)d, 0, 0, 0, 0)) < 0) fail(rec, r);
        } else if (op == 4 || op == 5) {
            r = sys6(S_IOCTL, slot[a], b, op == 4 ? (long)d : (long)rd(d), 0, 0, 0);
            if (r < 0) fail(rec, r);
        } else {
            fail(rec, 22);
        }
    }
    sys6(S_EXIT, 0, 0, 0, 0, 0, 0);
}
