//! The documentation checked against the code (issue 29): every config key
//! a plugin reads has a line in its README's key tables
//! (`scripts/check-readme-keys`, which takes the keys from each
//! plugin's `src/config.rs`), and `scripts/bench --report` renders a run's
//! JSON into the performance page and its chart with the run's figures,
//! several runs (the machine's and a VM's) into one page, and the committed
//! page and chart are exactly that rendering of the committed runs.
//! Both scripts are Python (python3's standard library only); these tests
//! run them so `cargo test` fails when they do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn have_python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP: python3 is not installed");
    }
    ok
}

/// A fresh scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cmd`, which must succeed (its stderr in the failure).
fn succeed(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn bn_every_config_key_has_a_readme_line() {
    if !have_python() {
        return;
    }
    let out = succeed(Command::new("python3").arg(root().join("scripts/check-readme-keys")));
    let text = String::from_utf8_lossy(&out.stdout);
    // The keys come from the source, both ways plugins read them: a
    // derived struct (tuning's `txQLen`, a serde rename) and a
    // hand-written parser (bandwidth's `ingressRate`, host-local's
    // `rangeStart`).
    for (plugin, key) in [
        ("tuning", "txQLen"),
        ("bandwidth", "ingressRate"),
        ("host-local", "rangeStart"),
        ("bridge", "isGateway"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{plugin}: ")))
            .unwrap_or_else(|| panic!("no line for {plugin}:\n{text}"));
        assert!(
            line.split_whitespace().any(|k| k == key),
            "{plugin}'s keys lack {key}: {line}"
        );
    }
}

/// A small run as `scripts/bench` writes it: two rows, each missing a
/// target, one with a floor; the spawn and std floors, sizes.
fn fixture() -> serde_json::Value {
    let side = |median: f64, p90: f64, rss: u64| {
        json!({"wall_ms": [median, p90], "rss_kib": [rss], "wall_median": median,
               "wall_p90": p90, "rss_median": rss})
    };
    json!({
        "schema": 1, "date": "2031-02-03T04:05:06Z",
        "machine": {"cpu": "Test CPU 9000", "cores": 7, "memory_kib": 1024},
        "kernel": "9.9.9-bn", "load": {"start": [1.25, 1.0, 1.0], "end": [2.5, 1.0, 1.0]},
        "commit": {"describe": "bnfix12", "dirty": false},
        "reference": {"dir": "/usr/lib/cni", "version": "1.1.1+ds1-3+b5", "go": "go1.19.8"},
        "ours": {"dir": "/tmp/x"}, "runs": 33, "filters": [], "multicall": false,
        "spawn_floor": {"wall_ms": [0.17], "ref_wall_ms": [1.9], "median": 0.171,
                        "p90": 0.199, "ref_median": 1.93},
        "std_floor": {"wall_ms": [0.24], "version_wall_ms": [0.27], "median": 0.241,
                      "p90": 0.25, "version_median": 0.271},
        "rows": [
            {"name": "bnrow ADD", "plugin": "bridge", "against": "go",
             "sides": {"ours": side(2.346, 3.456, 900), "ref": side(8.766, 9.876, 7200),
                       "floor": side(1.777, 2.111, 0)},
             "ratio": {"time": 0.2675, "rss": 0.125, "floor": 1.3197},
             "target": {"time": 0.28, "rss": 0.35, "floor": 1.15}, "missed": ["floor"],
             "floor": {"how": "ip -batch", "median": 1.777, "processes": 6}},
            {"name": "bnrow DEL", "plugin": "bridge", "against": "go",
             "sides": {"ours": side(17.5, 19.25, 900), "ref": side(16.25, 18.0, 7000)},
             "ratio": {"time": 1.0769, "rss": 0.1286}, "target": {"time": 0.85, "rss": null},
             "missed": ["time"], "floor": null}
        ],
        "sizes": [{"plugin": "bridge", "ours": 1_222_160, "ref": 2_943_104,
                   "ratio": 0.4153, "target": 0.5, "missed": false}],
        "set_sizes": {"ours": {"bytes": 18_583_112, "files": 18, "names": 18},
                      "multicall": null, "missed": false,
                      "ref": {"bytes": 45_797_496, "files": 16, "names": 16}},
        "missed": 1
    })
}

#[test]
fn bn_bench_report_renders_its_json() {
    if !have_python() {
        return;
    }
    let dir = scratch("bn-report");
    let (json_path, page, chart) = (dir.join("run.json"), dir.join("p.md"), dir.join("p.svg"));
    std::fs::write(&json_path, fixture().to_string()).unwrap();
    let before = "# Hand-written title\n\nprose before\n\n";
    let after = "\nprose after\n";
    std::fs::write(
        &page,
        format!(
            "{before}<!-- BEGIN generated by `scripts/bench --report`: do not edit by hand -->\nstale\n<!-- END generated by `scripts/bench --report` -->\n{after}"
        ),
    )
    .unwrap();
    let run = || report(&[&json_path], &page, &chart);
    let (md, svg) = run();
    // The prose around the markers stays; what was between them goes.
    assert!(md.starts_with(before), "{md}");
    assert!(md.ends_with(after), "{md}");
    assert!(!md.contains("stale"), "{md}");
    for want in [
        "2031-02-03T04:05:06Z",
        "bnfix12",
        "Test CPU 9000 (7 cores)",
        "9.9.9-bn",
        "Debian 1.1.1+ds1-3+b5",
        "go1.19.8",
        "33 runs per side",
        "1 target(s) missed",
        "| bnrow ADD | 2.35 / 3.46 | Go | 8.77 / 9.88 | 1.78 | 0.268× | **1.320×** | 0.125× | time ≤ 0.28×, RSS ≤ 0.35×, floor ≤ 1.15× |",
        // A missed target is in bold.
        "| bnrow DEL | 17.5 / 19.2 | Go | 16.2 / 18.0 |  | **1.077×** |  | 0.129× | time ≤ 0.85× |",
        "0.17 ms median",
        // The std floor, and what it costs over the spawn floor.
        "0.24 ms median, p90 0.25 ms, 0.07 ms over the spawn floor",
        "loopback VERSION beside it: 0.27 ms",
        // Six processes' std cost on top of the floor: above its target.
        "no plugin written with Rust's std could meet that target in this run: bnrow ADD (that bound / floor 1.236×, target 1.150×).",
        "| bridge | 1,222,160 | 2,943,104 | 0.415× | ≤ 0.5× |",
        "18,583,112",
    ] {
        assert!(md.contains(want), "page lacks {want:?}:\n{md}");
    }
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    for want in [
        "bnrow ADD",
        "bnrow DEL",
        "rcni / them 0.268×",
        "rcni / floor 1.320×",
        "rcni / them 1.077×",
        "2031-02-03T04:05:06Z",
    ] {
        assert!(svg.contains(want), "chart lacks {want:?}:\n{svg}");
    }
    // The legend's target lines, and one per row and target.
    assert_eq!(
        svg.matches("stroke=\"#c00\" stroke-width=\"2\"/>").count(),
        3
    );
    assert_eq!(
        svg.matches("stroke=\"#7a3d00\" stroke-width=\"2\"/>")
            .count(),
        2
    );
    // The same JSON gives the same page and chart.
    assert_eq!(run(), (md, svg));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A storm run as `scripts/storm --json` writes it (the bench's context,
/// then one row per chain and command): the Podman ADD missing its time
/// target, the Kubernetes DEL with a floor, a check that failed.
fn storm_fixture() -> serde_json::Value {
    let side = |wall: f64, cpu: f64, p50: f64, p99: f64| {
        json!({"rounds": [{"wall_ms": wall, "cpu_ms": cpu, "p50_ms": p50, "p90_ms": p99,
                           "p99_ms": p99, "pod_ms": [p50, p99], "failures": 0, "duplicates": 0}],
               "failures": 0, "duplicates": 0, "wall_median": wall, "wall_p90": wall,
               "cpu_median": cpu, "cpu_p90": cpu, "p50_median": p50, "p50_p90": p50,
               "p90_median": p99, "p90_p90": p99, "p99_median": p99, "p99_p90": p99})
    };
    let mut run = fixture();
    let meta = run.as_object_mut().unwrap();
    for key in ["rows", "spawn_floor", "std_floor", "sizes", "set_sizes"] {
        meta.remove(key);
    }
    meta.insert("kind".into(), json!("storm"));
    meta.insert("pods".into(), json!(50));
    meta.insert("runs".into(), json!(4));
    meta.insert("missed".into(), json!(2));
    meta.insert(
        "problems".into(),
        json!(["podman ours round 1: add: 49 reservations for 50 pods"]),
    );
    meta.insert(
        "storms".into(),
        json!([
            {"chain": "podman", "command": "ADD",
             "sides": {"ours": side(345.6, 300.0, 200.0, 250.0),
                       "ref": side(2345.6, 4000.0, 1500.0, 2000.0)},
             "ratio": {"wall": 0.14734, "cpu": 0.075, "p99_over_p50": 1.25,
                       "wall_rounds": [0.14734]},
             "target": {"wall": 0.12, "p99_over_p50": 1.5}, "missed": ["wall"]},
            {"chain": "k8s", "command": "DEL",
             "sides": {"ours": side(150.0, 90.0, 100.0, 140.0),
                       "ref": side(1000.0, 800.0, 700.0, 900.0),
                       "floor": side(120.0, 30.0, 80.0, 110.0)},
             "ratio": {"wall": 0.15, "cpu": 0.1125, "p99_over_p50": 1.4,
                       "wall_rounds": [0.15], "floor": 1.25, "floor_rounds": [1.25]},
             "target": {"wall": 0.2, "p99_over_p50": 1.5}, "missed": []}
        ]),
    );
    run
}

/// A storm run (`scripts/storm --json`) renders between the storm
/// markers, beside the bench's own run in its block, with the run's
/// context, both sides' medians, the ratios (a missed one in bold) and
/// the failed checks; without a storm run the storm block stays as it
/// was.
#[test]
fn af_storm_json_renders_into_its_block() {
    if !have_python() {
        return;
    }
    let dir = scratch("af-storm-report");
    let (bench_json, storm_json) = (dir.join("bench.json"), dir.join("storm.json"));
    std::fs::write(&bench_json, fixture().to_string()).unwrap();
    std::fs::write(&storm_json, storm_fixture().to_string()).unwrap();
    let (page, chart) = (dir.join("p.md"), dir.join("p.svg"));
    let storm_block = "<!-- BEGIN generated by `scripts/bench --report` from `scripts/storm --json`: do not edit by hand -->\nold storm\n<!-- END generated by `scripts/bench --report` from `scripts/storm --json` -->\n";
    std::fs::write(
        &page,
        format!(
            "before\n<!-- BEGIN generated by `scripts/bench --report`: do not edit by hand -->\n<!-- END generated by `scripts/bench --report` -->\nmiddle\n{storm_block}after\n"
        ),
    )
    .unwrap();
    let (md, _) = report(&[&bench_json, &storm_json], &page, &chart);
    let (bench_part, storm_part) = md.split_at(md.find("\nmiddle\n").expect(&md));
    assert!(
        bench_part.contains("| bnrow ADD | 2.35 / 3.46 | Go |"),
        "{md}"
    );
    assert!(!bench_part.contains("podman ADD"), "{md}");
    assert!(!storm_part.contains("old storm"), "{md}");
    assert!(storm_part.ends_with("after\n"), "{md}");
    for want in [
        "source: `storm.json`",
        "commit `bnfix12`",
        "9.9.9-bn",
        "Debian 1.1.1+ds1-3+b5",
        "50 pods per storm, 4 rounds per side (ABBA); 2 target(s) missed",
        "| podman ADD | 346 / 346 | 2346 / 2346 | **0.147×** | time ≤ 0.12×, p99 ≤ 1.5× p50 | 200 / 250 / 250 | 1.250× | 300 / 300 | 4000 / 4000 | 0.075× |  |  | 0, 0; 0, 0 |",
        "| k8s DEL | 150 / 150 | 1000 / 1000 | 0.150× | time ≤ 0.2×,",
        "| 90.0 / 90.0 | 800 / 800 | 0.113× | 120 / 120 | 1.250× | 0, 0; 0, 0 |",
        "- podman ours round 1: add: 49 reservations for 50 pods",
    ] {
        assert!(
            storm_part.contains(want),
            "storm block lacks {want:?}:\n{md}"
        );
    }
    // Without a storm run, the storm block is left alone.
    std::fs::write(
        &page,
        format!(
            "<!-- BEGIN generated by `scripts/bench --report`: do not edit by hand -->\n<!-- END generated by `scripts/bench --report` -->\n{storm_block}"
        ),
    )
    .unwrap();
    let (md, _) = report(&[&bench_json], &page, &chart);
    assert!(md.contains("old storm"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `scripts/bench --report` with `args` (the runs' JSON; none: the
/// committed runs) onto `page` and `chart`, and returns what they hold.
fn report(args: &[&Path], page: &Path, chart: &Path) -> (String, String) {
    succeed(
        Command::new("python3")
            .arg(root().join("scripts/bench"))
            .arg("--report")
            .args(args)
            .arg("--page")
            .arg(page)
            .arg("--chart")
            .arg(chart),
    );
    (
        std::fs::read_to_string(page).unwrap(),
        std::fs::read_to_string(chart).unwrap(),
    )
}

/// docs/performance.md's generated part and docs/performance.svg are what
/// `scripts/bench --report` renders from the committed runs
/// (docs/performance.json and docs/performance-vm*.json): a figure edited
/// by hand between the markers, a JSON committed without re-rendering, or
/// a report change not re-run over the committed JSON fails here.
#[test]
fn dc_performance_page_is_the_committed_runs_rendered() {
    if !have_python() {
        return;
    }
    let dir = scratch("dc-report");
    let (page, chart) = (dir.join("performance.md"), dir.join("performance.svg"));
    let committed_md = std::fs::read_to_string(root().join("docs/performance.md")).unwrap();
    let committed_svg = std::fs::read_to_string(root().join("docs/performance.svg")).unwrap();
    std::fs::write(&page, &committed_md).unwrap();
    let (md, svg) = report(&[], &page, &chart);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        md == committed_md,
        "docs/performance.md differs from `scripts/bench --report`'s rendering of the committed \
         runs: run `scripts/bench --report` and commit the result"
    );
    assert!(
        svg == committed_svg,
        "docs/performance.svg differs from `scripts/bench --report`'s rendering: run it"
    );
}

/// Several runs, the machine's own and a VM's (`scripts/vmtest --bench`
/// brings its JSON back), render into one page and one chart: each run
/// under a heading saying where it ran, with its own table; the binary
/// sizes once when the VM measured the same build; the VM's rows in the
/// chart labelled with the VM and its kernel.
#[test]
fn dc_bench_report_merges_vm_runs() {
    if !have_python() {
        return;
    }
    let dir = scratch("dc-merge");
    let host = fixture();
    let mut vm = fixture();
    vm["vm"] = json!("uml");
    vm["kernel"] = json!("6.1.0-dcvm");
    vm["machine"]["cpu"] = json!("UML");
    vm["rows"][0]["name"] = json!("dcvm ipvlan ADD");
    vm["rows"][1]["name"] = json!("dcvm ipvlan DEL");
    let (host_json, vm_json) = (dir.join("host.json"), dir.join("vm.json"));
    std::fs::write(&host_json, host.to_string()).unwrap();
    std::fs::write(&vm_json, vm.to_string()).unwrap();
    let (page, chart) = (dir.join("p.md"), dir.join("p.svg"));
    std::fs::write(
        &page,
        "before\n<!-- BEGIN generated by `scripts/bench --report`: do not edit by hand -->\n<!-- END generated by `scripts/bench --report` -->\nafter\n",
    )
    .unwrap();
    let (md, svg) = report(&[&host_json, &vm_json], &page, &chart);
    let host_at = md.find("### Run 1 of 2: kernel 9.9.9-bn\n").expect(&md);
    let vm_at = md
        .find("### Run 2 of 2: user-mode-linux VM, kernel 6.1.0-dcvm\n")
        .expect(&md);
    assert!(host_at < vm_at, "{md}");
    let (host_part, vm_part) = md.split_at(vm_at);
    assert!(
        host_part.contains("| bnrow ADD | 2.35 / 3.46 | Go |"),
        "{md}"
    );
    assert!(!host_part.contains("dcvm"), "{md}");
    assert!(
        vm_part.contains("| dcvm ipvlan ADD | 2.35 / 3.46 | Go |"),
        "{md}"
    );
    assert!(vm_part.contains("source: `vm.json`"), "{md}");
    // Where the VM's times compare.
    assert!(vm_part.contains("compare only with each other"), "{md}");
    // The same build's sizes are not repeated.
    assert_eq!(md.matches("| binary | rcni (bytes)").count(), 1, "{md}");
    // What the columns mean, once.
    assert_eq!(md.matches("Times are medians of wall time").count(), 1);
    for want in [
        ">bnrow ADD</text>",
        ">dcvm ipvlan ADD [uml 6.1.0-dcvm]</text>",
        "dcvm ipvlan DEL [uml 6.1.0-dcvm]: rcni / them 1.077×",
        "and 1 more run(s)",
    ] {
        assert!(svg.contains(want), "chart lacks {want:?}:\n{svg}");
    }
    // Another build in the VM: its sizes are its own table.
    vm["sizes"][0]["ours"] = json!(1_000_000);
    std::fs::write(&vm_json, vm.to_string()).unwrap();
    let (md2, _) = report(&[&host_json, &vm_json], &page, &chart);
    assert_eq!(md2.matches("| binary | rcni (bytes)").count(), 2, "{md2}");
    // Deterministic.
    std::fs::write(&vm_json, {
        vm["sizes"][0]["ours"] = json!(1_222_160);
        vm.to_string()
    })
    .unwrap();
    assert_eq!(report(&[&host_json, &vm_json], &page, &chart), (md, svg));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Figures that stay typed in the docs, each with why: constants of the
/// code, the kernel or a standard (a bound, a timeout, a default), which
/// no run measures. A measured figure belongs in a generated block (the
/// bench's or the fuzzers' report) or in the commit message that measured
/// it.
const TYPED_FIGURES: &[(&str, &[&str], &str)] = &[
    (
        "docs/design.md",
        &["0.30 ×", "0.5 ×"],
        "the binary size targets, scripts/bench's SIZE_TARGETS",
    ),
    (
        "docs/release.md",
        &["64 KiB"],
        "the kernel's fault-around window",
    ),
    (
        "docs/reliability.md",
        &["1 MiB"],
        "the size of hostile.rs's inputs",
    ),
    (
        "docs/security.md",
        &["60 s", "85 %", "50 %", "15 s", "4 s"],
        "the dhcp daemon's renewal schedule: dhclient's floor, RFC 2131's defaults, its own floors",
    ),
    (
        "docs/security.md",
        &["256 KiB", "1 MiB", "2 MiB", "64 KiB", "30 s"],
        "the dhcp daemon's RPC bounds and deadline, RCNI_LOCK_TIMEOUT's default",
    ),
    (
        "plugins/bandwidth/README.md",
        &["4 GB", "25 ms", "275 s", "274.9 s"],
        "tbf's limits and the plugin's latency",
    ),
    (
        "plugins/dhcp/README.md",
        &["1 MiB", "2 MiB", "64 KiB", "30 s", "256 KiB"],
        "the RPC bounds and deadline, the threads' stacks",
    ),
    (
        "plugins/dhcp/README.md",
        &[
            "5 s", "10 s", "62 s", "208 s", "2 s", "1 s", "4 s", "8 s", "50 %", "4-60 s", "85 %",
            "60 s", "15 s",
        ],
        "the daemon's flags' defaults, the reference's retries, the renewal schedule, a test's window",
    ),
    (
        "plugins/firewall/README.md",
        &["20 s"],
        "the D-Bus client's timeout per call",
    ),
    (
        "plugins/host-local/README.md",
        &["1–10 ms"],
        "a coarse kernel clock's tick",
    ),
    (
        "plugins/tap/README.md",
        &["10 s", "5 s"],
        "the plugin's bound on its helper, the reference's wait",
    ),
    (
        "plugins/vrf/README.md",
        &["2.5 s"],
        "the plugin's bound on an address becoming usable",
    ),
];

/// The figures in one line of prose: a number (its preceding character
/// not part of a word, a version or a sign; digits with `,`/`.` inside and
/// a `–`/`-` range) followed, after at most one space, by a unit of time,
/// size, a ratio (`×`, `x`) or a percentage that ends there, or bytes
/// after a number with a thousands separator. Each comes back as "number
/// unit".
fn figures_in(line: &str) -> Vec<String> {
    const UNITS: &[&str] = &[
        "KiB", "MiB", "GiB", "min", "ms", "µs", "ns", "KB", "kB", "MB", "GB", "s", "%", "×", "x",
    ];
    // Inline code (`...`) is a command or a value, not a figure.
    let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let c: Vec<char> = prose.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts = c[i].is_ascii_digit()
            && (i == 0 || !(c[i - 1].is_alphanumeric() || ".-−_,".contains(c[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < c.len()
            && (c[j].is_ascii_digit()
                || (",.–-".contains(c[j]) && c.get(j + 1).is_some_and(|d| d.is_ascii_digit())))
        {
            j += 1;
        }
        let number: String = c[i..j].iter().collect();
        let mut k = j;
        if k < c.len() && [' ', '\u{a0}', '\u{202f}'].contains(&c[k]) {
            k += 1;
        }
        let rest: String = c[k..].iter().collect();
        // A size in bytes with a thousands separator is a measured binary
        // or file (a bound in bytes is written without one).
        let units: &[&str] = if number.contains(',') {
            &["bytes", "B"]
        } else {
            &[]
        };
        if let Some(unit) = UNITS.iter().chain(units).find(|u| {
            rest.starts_with(**u)
                && !rest[u.len()..]
                    .chars()
                    .next()
                    .is_some_and(|n| n.is_alphanumeric())
        }) {
            out.push(format!("{number} {unit}"));
        }
        i = j.max(i + 1);
    }
    out
}

/// No figure is typed by hand in README.md, docs/ or a plugin's README
/// (issue 29): outside the generated blocks (`<!-- BEGIN generated ...`
/// to `<!-- END generated ...`), fenced code and inline code, every
/// number with a unit of time, size, ratio or percentage must be one of
/// TYPED_FIGURES, a constant with its reason. A measured figure goes in a
/// run's JSON and its report, or in the commit message that measured it.
#[test]
fn dc_no_hand_typed_figures_outside_generated_blocks() {
    // The scanner itself: what it takes and what it leaves.
    assert_eq!(
        figures_in("3–14× faster, 18.6 MB, 0.95x, 12 ms, 80 %, 1,496 µs, 807,544 bytes"),
        [
            "3–14 ×",
            "18.6 MB",
            "0.95 x",
            "12 ms",
            "80 %",
            "1,496 µs",
            "807,544 bytes"
        ]
    );
    assert!(figures_in("l3s, 0.3.x, 1.x, 0x10, v1.1.1, `50 ms`, 4096 bytes").is_empty());
    let mut files = vec![root().join("README.md")];
    for dir in ["docs", "plugins"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if dir == "docs" && path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            } else if dir == "plugins" && path.join("README.md").exists() {
                files.push(path.join("README.md"));
            }
        }
    }
    files.sort();
    let mut found = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let allowed: Vec<&str> = TYPED_FIGURES
            .iter()
            .filter(|(f, _, _)| *f == rel)
            .flat_map(|(_, figs, _)| figs.iter().copied())
            .collect();
        let (mut generated, mut fence) = (false, false);
        for (n, line) in std::fs::read_to_string(path).unwrap().lines().enumerate() {
            if line.starts_with("<!-- BEGIN generated") {
                generated = true;
            } else if line.starts_with("<!-- END generated") {
                generated = false;
            } else if line.trim_start().starts_with("```") {
                fence = !fence;
            } else if !generated && !fence {
                for fig in figures_in(line) {
                    if !allowed.contains(&fig.as_str()) {
                        found.push(format!("{rel}:{}: {fig:?} in {line:?}", n + 1));
                    }
                }
            }
        }
        assert!(!generated, "{rel}: a generated block is not closed");
    }
    assert!(
        found.is_empty(),
        "figures typed by hand (generate them from a run's JSON, point to the commit that \
         measured them, or add a constant to TYPED_FIGURES with its reason):\n{}",
        found.join("\n")
    );
}

/// docs/reliability.md's fuzzing table is what `scripts/fuzz --report`
/// renders from the committed run, docs/fuzz.json (`scripts/fuzz --json`
/// wrote it), and that run covers every cargo-fuzz target in
/// fuzz/Cargo.toml with a count of executions: a figure edited by hand, a
/// run committed without its rendering, or a target added without a run
/// fails here.
#[test]
fn dc_reliability_fuzz_table_is_the_committed_run_rendered() {
    if !have_python() {
        return;
    }
    let dir = scratch("dc-fuzz");
    let page = dir.join("reliability.md");
    let committed = std::fs::read_to_string(root().join("docs/reliability.md")).unwrap();
    std::fs::write(&page, &committed).unwrap();
    succeed(
        Command::new(root().join("scripts/fuzz"))
            .arg("--report")
            .arg("--page")
            .arg(&page)
            .current_dir(root()),
    );
    let rendered = std::fs::read_to_string(&page).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        rendered == committed,
        "docs/reliability.md's fuzzing table differs from `scripts/fuzz --report`'s rendering \
         of docs/fuzz.json: run `scripts/fuzz --report` and commit the result"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("docs/fuzz.json")).unwrap())
            .unwrap();
    let cargo = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    let targets: Vec<&str> = cargo
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| {
            bin.lines()
                .find_map(|l| l.trim().strip_prefix("name = "))
                .map(|n| n.trim_matches('"'))
        })
        .collect();
    assert!(!targets.is_empty(), "no [[bin]] in fuzz/Cargo.toml");
    for target in targets {
        let row = run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == target)
            .unwrap_or_else(|| panic!("docs/fuzz.json has no run of {target}"));
        assert!(
            row["executions"].as_u64().is_some_and(|n| n > 0),
            "{target}: no executions in docs/fuzz.json: {row}"
        );
        assert!(
            rendered.contains(&format!("| {target} | ")),
            "{target}: no row in docs/reliability.md"
        );
    }
}
