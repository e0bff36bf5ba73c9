//! The token bucket the reference configures for a rate and a burst, in
//! the kernel's units, computed exactly as the reference computes it so
//! that `tc -s qdisc` reads the same on a node running either.
//!
//! The reference (bandwidth's `createTBF`, with the Go netlink library's
//! tick helpers) works in float64:
//! - rate and burst in bytes: `bits / 8`;
//! - buffer, the burst as transmission time in psched ticks:
//!   `u32(u32(burst * 1e6 / rate) * ticks_per_usec)`;
//! - limit, the queue in bytes: `u32(rate * 25 ms) + burst`.
//!
//! Where the reference's float-to-u32 casts overflow (the buffer does
//! whenever burst/rate exceeds about 275 s, e.g. for Kubernetes' default
//! burst), Go on amd64 wraps the value modulo 2^32 into an arbitrary
//! bucket size (arm64 saturates): at 1 Mbit/s with containerd's burst of
//! 2^32 - 1 bits (512 MiB), `tc` shows "burst 21474835b" (172 s). Here the
//! buffer saturates, as on arm64: the largest bucket the field can
//! describe, 274.9 s ("burst 34359738b" at that rate). The limit's `+ burst` is a u32 addition that Go
//! wraps on every platform; here it saturates. A rate whose 25 ms alone
//! do not fit 32 bits (above ~1.37 Tbit/s) is refused (see `config`).

/// psched ticks per microsecond. The Go library reads `/proc/net/psched`
/// ("000003e8 00000040 000f4240 …": 1000 ns per µs over 64 ns per tick,
/// clock at 1 MHz), which every kernel since 2.6.31 prints the same:
/// PSCHED_SHIFT is 6. The unit test compares with this machine's file.
pub const TICKS_PER_USEC: f64 = 1000.0 / 64.0;

/// The reference's fixed queueing latency, in microseconds (25 ms).
pub const LATENCY_USEC: f64 = 25_000.0;

/// The largest burst the reference accepts: `burst / 8 < 2^32 - 1` bytes.
pub const MAX_BURST_BITS: u64 = u32::MAX as u64 * 8 - 1;

/// Nanoseconds per psched tick.
const NSEC_PER_TICK: u64 = 64;

/// One tbf qdisc's parameters (`struct tc_tbf_qopt` plus the 64-bit rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Rate, bytes per second.
    pub rate: u64,
    /// Bucket size as transmission time at `rate`, psched ticks.
    pub buffer: u32,
    /// Queue limit, bytes.
    pub limit: u32,
}

/// Why a rate and burst cannot be expressed in the kernel's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooBig {
    /// 25 ms at the rate (bytes) exceeds u32.
    Limit(u64),
    /// The bucket the kernel derives from the buffer holds less than one
    /// byte: it refuses the qdisc (EINVAL).
    BurstBelowOneByte,
}

/// A float cast to u32 that saturates instead of wrapping (Rust's `as`
/// saturates; NaN, impossible here, would give 0).
fn to_u32(x: f64) -> u32 {
    x as u32
}

/// The tbf for `rate_bits` per second with a `burst_bits` bucket. The
/// caller has checked rate ≥ 8, 8 ≤ burst ≤ [`MAX_BURST_BITS`].
pub fn tbf(rate_bits: u64, burst_bits: u64) -> Result<Tbf, TooBig> {
    let rate = rate_bits / 8;
    let burst = u32::try_from(burst_bits / 8).map_err(|_| TooBig::Limit(burst_bits / 8))?;
    let usec = to_u32(f64::from(burst) * 1e6 / rate as f64);
    let buffer = to_u32(f64::from(usec) * TICKS_PER_USEC);
    // Truncated as Go's uint32() truncates. 25 ms at the rate must fit
    // (it does up to about 1.37 Tbit/s); with the burst added, the sum
    // saturates where Go's u32 addition wraps (CRI-O's default burst,
    // 2^32 - 2 bytes, wraps to a few KB of queue there).
    let latency_bytes = (rate as f64 * LATENCY_USEC / 1e6) as u64;
    let latency_bytes = u32::try_from(latency_bytes).map_err(|_| TooBig::Limit(latency_bytes))?;
    let limit = latency_bytes.saturating_add(burst);
    let t = Tbf {
        rate,
        buffer,
        limit,
    };
    if t.kernel_max_size() == 0 {
        return Err(TooBig::BurstBelowOneByte);
    }
    Ok(t)
}

impl Tbf {
    /// The bucket in bytes the kernel derives from rate and buffer
    /// (`psched_ns_t`, capped at u32), which `tc` prints as "burst".
    pub fn kernel_max_size(&self) -> u64 {
        let ns = u128::from(self.buffer) * u128::from(NSEC_PER_TICK);
        let bytes = ns * u128::from(self.rate) / 1_000_000_000;
        u64::try_from(bytes.min(u128::from(u32::MAX))).unwrap_or(u64::from(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's formulas as written, in Go's float64 with amd64's
    /// wrapping casts: the oracle for the values that do not overflow.
    fn go_amd64(rate_bits: u64, burst_bits: u64) -> (u64, u32, u32) {
        let wrap = |x: f64| (x as i64) as u32;
        let rate = rate_bits / 8;
        let burst = (burst_bits / 8) as u32;
        let time = wrap(f64::from(burst) * 1e6 / rate as f64);
        let buffer = wrap(f64::from(time) * 15.625);
        let limit = wrap(rate as f64 * (1e6 * (25.0 / 1000.0)) / 1e6).wrapping_add(burst);
        (rate, buffer, limit)
    }

    #[test]
    fn tick_matches_proc_net_psched() {
        let Ok(s) = std::fs::read_to_string("/proc/net/psched") else {
            return;
        };
        let v: Vec<u64> = s
            .split_whitespace()
            .map(|f| u64::from_str_radix(f, 16).unwrap())
            .collect();
        let (mut a, b, c) = (v[0], v[1], v[2]);
        if c == 1_000_000_000 {
            a = b;
        }
        let tick = a as f64 / b as f64 * (c as f64 / 1e6);
        assert_eq!(tick, TICKS_PER_USEC);
    }

    #[test]
    fn the_references_own_examples() {
        // bandwidth_linux_test.go: ingress 8/8 bits → rate 1, limit 1;
        // egress 16/8 → rate 2, limit 1.
        let t = tbf(8, 8).unwrap();
        assert_eq!((t.rate, t.limit, t.buffer), (1, 1, 15_625_000));
        let t = tbf(16, 8).unwrap();
        assert_eq!((t.rate, t.limit), (2, 1));
        // 1 Mbit/s, 1 Mbit burst: tc shows "rate 1Mbit burst 125000b lat 25ms".
        let t = tbf(1_000_000, 1_000_000).unwrap();
        assert_eq!((t.rate, t.buffer, t.limit), (125_000, 15_625_000, 128_125));
        assert_eq!(t.kernel_max_size(), 125_000);
    }

    #[test]
    fn equals_go_wherever_go_does_not_overflow() {
        let rates = [
            8,
            9,
            800,
            1_000_000,
            10_000_000,
            123_456_789,
            1_000_000_000,
            40_000_000_000,
            80_000_000_000,
        ];
        let bursts = [
            8,
            15,
            1000,
            12_000,
            100_000,
            1_000_000,
            4_294_967_295,
            MAX_BURST_BITS,
        ];
        for &r in &rates {
            for &b in &bursts {
                let go = go_amd64(r, b);
                let usec = f64::from((b / 8) as u32) * 1e6 / (r / 8) as f64;
                let overflows = usec * 15.625 >= 4_294_967_296.0;
                let limit_wraps = (r / 8) as f64 * 0.025 + (b / 8) as f64 >= 4_294_967_296.0;
                match tbf(r, b) {
                    Ok(t) if !overflows && !limit_wraps => {
                        assert_eq!((t.rate, t.buffer, t.limit), go, "{r}/{b}")
                    }
                    Ok(t) if limit_wraps => assert_eq!(t.limit, u32::MAX, "{r}/{b}"),
                    Ok(t) => {
                        assert_eq!(t.rate, go.0, "{r}/{b}");
                        assert_eq!(t.buffer, u32::MAX, "{r}/{b}");
                    }
                    Err(TooBig::BurstBelowOneByte) => {
                        let (rate, buffer, limit) = go;
                        let kernel = Tbf {
                            rate,
                            buffer,
                            limit,
                        };
                        assert_eq!(kernel.kernel_max_size(), 0, "{r}/{b}");
                    }
                    Err(e) => panic!("{r}/{b}: {e:?}"),
                }
            }
        }
    }

    #[test]
    fn kubernetes_default_burst_saturates() {
        // containerd's burst (MaxUint32 bits) at 1 Mbit/s: 4295 s of
        // buffer. Go on amd64 wraps it (tc: "burst 21474835b"); here it
        // saturates (tc: "burst 34359738b").
        let t = tbf(1_000_000, u64::from(u32::MAX)).unwrap();
        assert_eq!(t.buffer, u32::MAX);
        assert_eq!(t.kernel_max_size(), 34_359_738);
        assert_eq!(t.limit, 3125 + 536_870_911);
        assert_eq!(go_amd64(1_000_000, u64::from(u32::MAX)).1, 2_684_354_435);
    }

    #[test]
    fn rate64() {
        // 40 Gbit/s = 5e9 bytes/s needs TCA_TBF_RATE64.
        let t = tbf(40_000_000_000, 8_000_000).unwrap();
        assert_eq!(t.rate, 5_000_000_000);
        assert_eq!(t.limit, 125_000_000 + 1_000_000);
        assert_eq!(t.buffer, 3125);
    }

    #[test]
    fn limits_that_do_not_fit() {
        assert!(matches!(tbf(u64::MAX, 8), Err(TooBig::Limit(_))));
        // 25 ms at 1 MB/s plus the largest burst (CRI-O's default)
        // saturates.
        assert_eq!(tbf(8_000_000, MAX_BURST_BITS).unwrap().limit, u32::MAX);
        // The largest burst fits at a low rate.
        assert!(tbf(8, MAX_BURST_BITS).is_ok());
    }

    #[test]
    fn bucket_of_less_than_a_byte() {
        // 1 byte at 3 bytes/s: 333333 µs → 5208328 ticks → 0.99 bytes.
        assert_eq!(tbf(24, 8), Err(TooBig::BurstBelowOneByte));
        assert!(tbf(16, 8).is_ok());
    }
}
