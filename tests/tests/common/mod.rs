//! Shared by the hardening tests (hostile, kill9, concurrency, soak): CNI
//! environments with raw bytes in them (run by `rcni_tests::Invocation`), snapshots of a
//! private host namespace's links, addresses and rules, and summary lines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcni_tests::Netns;
use serde_json::Value;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Command;

/// Writes one line straight to stderr (libtest captures `eprintln!`).
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// An environment variable from raw bytes.
pub fn os(s: impl Into<Vec<u8>>) -> OsString {
    OsString::from_vec(s.into())
}

/// The usual `CNI_*` environment.
pub fn cni_env(command: &str, cid: &str, netns: &str, ifname: &str) -> Vec<(OsString, OsString)> {
    vec![
        ("CNI_COMMAND".into(), command.into()),
        ("CNI_CONTAINERID".into(), cid.into()),
        ("CNI_NETNS".into(), netns.into()),
        ("CNI_IFNAME".into(), ifname.into()),
        ("CNI_PATH".into(), rcni_tests::bin_dir().into_os_string()),
    ]
}

/// Replaces (or adds) one variable.
pub fn set_env(env: &mut Vec<(OsString, OsString)>, key: &str, value: OsString) {
    env.retain(|(k, _)| k != key);
    env.push((key.into(), value));
}

/// Removes one variable.
pub fn unset_env(env: &mut Vec<(OsString, OsString)>, key: &str) {
    env.retain(|(k, _)| k != key);
}

/// The state of a namespace that a plugin may change, normalised so that
/// only real changes show: links (name, master, admin state, promisc and
/// allmulti, MTU, MAC, kind, txqlen), addresses (but IPv6 link-local
/// ones), qdiscs (kind, handle, parent, tbf parameters), iptables and
/// ip6tables rules and chains (no counters) and the nft ruleset.
///
/// Links, addresses and qdiscs come over netlink; the rule tools run
/// straight in the namespace (no `ip netns exec`, no `sh`): under
/// user-mode-linux each exec costs 25-190 ms. iptables-save and
/// ip6tables-save are left out when they would print nothing: when they
/// are iptables-nft and `nft list ruleset` shows no table of their family
/// (their rules live in those tables; always so under user-mode-linux,
/// which has no nf_tables for ip and ip6). One exec there, then.
pub fn snapshot(ns: &Netns) -> Vec<String> {
    // What the tool printed on stdout, whether it succeeded or not (as the
    // shell script this replaces took it), and whether it did.
    let run = |program: &str, args: &[&str]| -> (String, bool) {
        match ns.output(Command::new(program).args(args)) {
            Ok(out) => (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                out.status.success(),
            ),
            Err(_) => (String::new(), false),
        }
    };
    let (ruleset, nft_ok) = run("nft", &["list", "ruleset"]);
    let mut rest = String::new();
    for (tool, family) in [("iptables-save", "ip"), ("ip6tables-save", "ip6")] {
        let table = format!("table {family} ");
        if cni_fw::iptables::is_nft_variant(cni_fw::iptables::Family::V4)
            && nft_ok
            && !ruleset.lines().any(|l| l.starts_with(&table))
        {
            continue;
        }
        rest += &run(tool, &[]).0;
    }
    rest += &ruleset;
    let mut lines = links_addrs_qdiscs(ns).unwrap_or_else(|e| vec![format!("netlink error {e}")]);
    for line in rest.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        // Chain policy counters ([0:0]) and nft counters.
        let mut words: Vec<&str> = Vec::new();
        let mut skip = 0;
        for w in t.split_whitespace() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if w == "packets" || w == "bytes" {
                skip = 1;
                continue;
            }
            if w.starts_with('[') && w.ends_with(']') && w.contains(':') {
                continue;
            }
            words.push(w);
        }
        lines.push(format!("rule {}", words.join(" ")));
    }
    lines.sort();
    lines
}

/// The snapshot's lines of links, addresses and qdiscs, read over netlink
/// (cni-net) from this process: `ip -j addr show` and `tc qdisc show`
/// cost 70 and 190 ms of exec under user-mode-linux.
fn links_addrs_qdiscs(ns: &Netns) -> Result<Vec<String>, cni_net::NetError> {
    let nl = cni_net::Netlink::for_ns(&cni_net::NetNs::open(ns.path())?)?;
    let links = nl.links()?;
    let name_of = |index: u32| {
        links
            .iter()
            .find(|l| l.index == index)
            .map_or_else(|| index.to_string(), |l| l.name.clone())
    };
    let mut lines = Vec::new();
    for l in &links {
        let flags: Vec<&str> = [
            (l.up, "UP"),
            (l.promisc, "PROMISC"),
            (l.allmulti, "ALLMULTI"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        lines.push(format!(
            "link {} master={} mtu={} mac={} flags={} kind={} txqlen={}",
            l.name,
            l.master.map_or_else(|| "-".to_string(), name_of),
            l.mtu,
            if l.mac.is_empty() { "-" } else { &l.mac },
            flags.join(","),
            l.kind,
            l.txqlen,
        ));
        for a in nl.addrs(l, None)? {
            // The kernel's own IPv6 link-local addresses come and go with
            // the link's state.
            if matches!(a.address.ip(), std::net::IpAddr::V6(v6) if v6.segments()[0] == 0xfe80) {
                continue;
            }
            lines.push(format!("addr {} {}", l.name, a.address));
        }
        for q in nl.qdiscs(l)? {
            lines.push(format!(
                "qdisc {} {:x}: dev {} parent {:x} {:?}",
                q.kind, q.handle, l.name, q.parent, q.tbf
            ));
        }
    }
    Ok(lines)
}

/// The lines only in `before` (-) or only in `after` (+).
pub fn diff(before: &[String], after: &[String]) -> Vec<String> {
    let mut d: Vec<String> = before
        .iter()
        .filter(|l| !after.contains(l))
        .map(|l| format!("-{l}"))
        .collect();
    d.extend(
        after
            .iter()
            .filter(|l| !before.contains(l))
            .map(|l| format!("+{l}")),
    );
    d
}

/// How many addresses host-local holds in the network directory `net_dir`
/// (its files named by an address).
pub fn reservations(net_dir: &Path) -> usize {
    std::fs::read_dir(net_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .parse::<std::net::IpAddr>()
                .is_ok()
        })
        .count()
}

/// Every file under `dir` (recursively), as paths relative to it.
pub fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap_or(&p).display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A copy of `conf` with `value` at `path` (objects created on the way;
/// a number in the path indexes an array, grown with objects as needed).
pub fn set_at<S: AsRef<str>>(conf: &Value, path: &[S], value: Value) -> Value {
    let mut c = conf.clone();
    let mut cur = &mut c;
    for (i, key) in path.iter().enumerate() {
        let key = key.as_ref();
        let last = i + 1 == path.len();
        if let Ok(n) = key.parse::<usize>()
            && cur.is_array()
        {
            let arr = cur.as_array_mut().unwrap();
            while arr.len() <= n {
                arr.push(Value::Object(Default::default()));
            }
            if last {
                arr[n] = value;
                return c;
            }
            cur = &mut arr[n];
            continue;
        }
        if !cur.is_object() {
            *cur = Value::Object(Default::default());
        }
        let m = cur.as_object_mut().unwrap();
        if last {
            m.insert(key.to_string(), value);
            return c;
        }
        cur = m
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    c
}

/// The masquerade rules of `cid` on network `net` (addresses `ips`, as the
/// result gives them, in `subnets`) as `iptables -t nat -S` prints them
/// when iptables-restore wrote them: the reference's text.
pub fn masq_expected(net: &str, cid: &str, ips: &[String], subnets: &[&str]) -> [Vec<String>; 2] {
    let chain = cni_fw::hash::chain_name(net, cid);
    let c = format!(r#"-m comment --comment "name: \"{net}\" id: \"{cid}\"""#);
    let mut out = [vec![format!("-N {chain}")], vec![format!("-N {chain}")]];
    for (ip, subnet) in ips.iter().zip(subnets) {
        let v6 = ip.contains(':');
        let (host, multicast) = if v6 {
            ("128", "ff00::/8")
        } else {
            ("32", "224.0.0.0/4")
        };
        let ip = ip.split('/').next().unwrap();
        let lines = &mut out[usize::from(v6)];
        lines.push(format!("-A POSTROUTING -s {ip}/{host} {c} -j {chain}"));
        lines.push(format!("-A {chain} -d {subnet} {c} -j ACCEPT"));
        lines.push(format!("-A {chain} ! -d {multicast} {c} -j MASQUERADE"));
    }
    out
}

/// The lines of `iptables -t nat -S` and `ip6tables -t nat -S` in `host`
/// that name `cid`'s masquerade chain, in order.
pub fn masq_lines(host: &Netns, net: &str, cid: &str) -> [Vec<String>; 2] {
    let chain = cni_fw::hash::chain_name(net, cid);
    ["iptables", "ip6tables"].map(|tool| {
        host.exec_ok(tool, &["-t", "nat", "-S"])
            .lines()
            .filter(|l| l.split(' ').any(|w| w == chain))
            .map(String::from)
            .collect()
    })
}
