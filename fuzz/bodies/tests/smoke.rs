//! The CI smoke of every fuzz target, on stable, in every `cargo test`:
//! each target's seeds (tests/fuzz-corpus/*.json, which every target gets,
//! and tests/fuzz-corpus/<target>/*), then seeded mutations of them
//! (`RCNI_FUZZ_SMOKE_RUNS` per target, default 10,000, for at most
//! `RCNI_FUZZ_SMOKE_SECS` seconds, default 5), each a few mutations of a
//! seed or of the previous input (a random walk away from the seeds). Deterministic: the same
//! inputs on every run (`RCNI_FUZZ_SMOKE_SEED` changes them). A panic is
//! a failure that names the target and writes the input to
//! target/fuzz-smoke/<target>-crash-<n> (a seed for `cargo fuzz run`).
//!
//! It also checks that the cargo-fuzz binaries, `fuzz/Cargo.toml` and
//! `fuzz_bodies::TARGETS` name the same targets, so that none is left out
//! of the smoke.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fuzz_bodies::TARGETS;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus_dir() -> PathBuf {
    fuzz_dir().join("../tests/fuzz-corpus")
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The files of `dir` (none when it does not exist), sorted, those with
/// extension `ext` only when given.
fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    v.sort();
    v
}

/// `target`'s seeds, as scripts/fuzz gives them to libFuzzer.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir();
    let mut paths = files(&dir, Some("json"));
    paths.extend(files(&dir.join(target), None));
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// xorshift64*: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Values that sit on the edges parsers check: lengths, counts, signs.
const INTERESTING: &[u32] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    15,
    16,
    20,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// One to four libFuzzer-like mutations of `input`; `other` is another
/// seed to splice with.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                v.drain(i..i + n);
            }
            4 if len > 0 => {
                // Copy a chunk elsewhere (repeats a message or attribute).
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                let chunk = v[i..i + n].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, chunk);
            }
            5 if len >= 2 => {
                // An edge value in a 16- or 32-bit field, either byte order.
                let x = INTERESTING[rng.below(INTERESTING.len())];
                let wide = len >= 4 && rng.below(2) == 0;
                let bytes = if wide {
                    if rng.below(2) == 0 {
                        x.to_le_bytes()
                    } else {
                        x.to_be_bytes()
                    }
                    .to_vec()
                } else {
                    let x = x as u16;
                    if rng.below(2) == 0 {
                        x.to_le_bytes()
                    } else {
                        x.to_be_bytes()
                    }
                    .to_vec()
                };
                let i = rng.below(len - bytes.len() + 1);
                v[i..i + bytes.len()].copy_from_slice(&bytes);
            }
            6 if len > 0 => v.truncate(rng.below(len)),
            7 => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ if len > 0 => {
                let i = rng.below(len);
                v[i] = INTERESTING[rng.below(INTERESTING.len())] as u8;
            }
            _ => v.push(rng.next() as u8),
        }
    }
    v
}

/// Where a failing input is saved.
fn save(name: &str, what: &str, n: usize, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-smoke");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{what}-{n}"));
    let _ = std::fs::write(&path, input);
    path
}

/// The input being run: (target, its number, the bytes), for the watchdog.
type Current = Arc<Mutex<(&'static str, usize, Vec<u8>)>>;

/// Runs `body` on `input`; on a panic, saves the input and returns where.
fn run_one(
    current: &Current,
    name: &'static str,
    body: fuzz_bodies::Body,
    input: &[u8],
    n: usize,
) -> Option<PathBuf> {
    *current.lock().unwrap() = (name, n, input.to_vec());
    if catch_unwind(AssertUnwindSafe(|| body(input))).is_ok() {
        return None;
    }
    Some(save(name, "crash", n, input))
}

/// One target's seeds and mutations; the inputs that panicked.
fn smoke(current: &Current, t: usize, name: &'static str, body: fuzz_bodies::Body) -> Vec<PathBuf> {
    let runs = env_num("RCNI_FUZZ_SMOKE_RUNS", 10_000);
    let budget = Duration::from_secs(env_num("RCNI_FUZZ_SMOKE_SECS", 5));
    let seed = env_num("RCNI_FUZZ_SMOKE_SEED", 0x5eed_f022);
    let seeds = seeds(name);
    assert!(!seeds.is_empty(), "{name}: no seeds in tests/fuzz-corpus");
    let own = files(&corpus_dir().join(name), None).len();
    let start = Instant::now();
    let mut rng = Rng(seed ^ ((t as u64 + 1) << 32) | 1);
    let mut crashes = Vec::new();
    let mut done = 0;
    for s in &seeds {
        crashes.extend(run_one(current, name, body, s, done));
        done += 1;
    }
    let longest = seeds.iter().map(Vec::len).max().unwrap_or(0);
    let mut last = seeds[0].clone();
    for _ in 0..runs {
        // One crash per target is enough to fail and to start from.
        if start.elapsed() > budget || !crashes.is_empty() {
            break;
        }
        let b = &seeds[rng.below(seeds.len())];
        // The walk starts again from a seed when its input has grown.
        let input = if rng.below(2) == 0 && last.len() <= 2 * longest {
            mutate(&mut rng, &last, b)
        } else {
            let a = rng.below(seeds.len());
            mutate(&mut rng, &seeds[a], b)
        };
        crashes.extend(run_one(current, name, body, &input, done));
        done += 1;
        last = input;
    }
    eprintln!(
        "fuzz smoke: {name}: {} seeds ({own} its own), {done} runs in {:.1} s",
        seeds.len(),
        start.elapsed().as_secs_f64()
    );
    crashes
}

#[test]
fn every_target_survives_its_seeds_and_their_mutations() {
    // The targets run on a thread; this one is the watchdog: an input that
    // runs for a minute past the budget is a hang, saved like a crash.
    let limit = Duration::from_secs(env_num("RCNI_FUZZ_SMOKE_SECS", 5) + 60);
    let current: Current = Arc::new(Mutex::new(("", 0, Vec::new())));
    let (tx, rx) = mpsc::channel();
    let cur = current.clone();
    std::thread::spawn(move || {
        for (t, &(name, body)) in TARGETS.iter().enumerate() {
            let _ = tx.send((name, smoke(&cur, t, name, body)));
        }
    });
    let mut crashes = Vec::new();
    for _ in TARGETS {
        match rx.recv_timeout(limit) {
            Ok((_, found)) => crashes.extend(found),
            Err(_) => {
                let (name, n, input) = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let path = save(name, "hang", n, &input);
                panic!("fuzz target {name} ran over {limit:?} on the input saved in {path:?}");
            }
        }
    }
    assert!(
        crashes.is_empty(),
        "fuzz targets panicked; inputs saved in {crashes:?} (replay one with \
         `cargo +nightly fuzz run <target> <file>` in fuzz/)"
    );
}

/// The `name = "…"` of each `[[bin]]` in fuzz/Cargo.toml.
fn cargo_fuzz_bins() -> BTreeSet<String> {
    let toml = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let mut out = BTreeSet::new();
    let mut in_bin = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(v) = line.strip_prefix("name = ") {
            out.insert(v.trim_matches('"').to_string());
        }
    }
    out
}

#[test]
fn the_smoke_covers_every_cargo_fuzz_target() {
    let listed: BTreeSet<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(listed.len(), TARGETS.len(), "a name twice in TARGETS");
    assert_eq!(
        cargo_fuzz_bins(),
        listed,
        "fuzz/Cargo.toml's [[bin]]s and fuzz_bodies::TARGETS differ"
    );
    let sources: BTreeSet<String> = files(&fuzz_dir().join("fuzz_targets"), Some("rs"))
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(sources, listed, "fuzz/fuzz_targets/*.rs and TARGETS differ");
    for name in &listed {
        let src =
            std::fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{name}.rs"))).unwrap();
        assert!(
            src.contains(&format!("fuzz_bodies::{name}(")),
            "fuzz/fuzz_targets/{name}.rs does not call fuzz_bodies::{name}"
        );
    }
}

#[test]
fn datagram_framing_round_trips() {
    let d = vec![vec![1, 2, 3], vec![], vec![9; 300]];
    let framed = fuzz_bodies::frame(7, &d);
    assert_eq!(framed[0], 7);
    assert_eq!(fuzz_bodies::datagrams(&framed[1..]), d);
    // A length past the end takes the rest; a lone byte is no datagram.
    assert_eq!(fuzz_bodies::datagrams(&[9, 0, 1, 2]), vec![vec![1, 2]]);
    assert_eq!(fuzz_bodies::datagrams(&[1]), Vec::<Vec<u8>>::new());
}
