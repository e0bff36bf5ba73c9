//! Fast path of iptables ADD: one transaction that creates the
//! container's chain, fills it and adds its `CNI-HOSTPORT-DNAT` entries,
//! without reading the table first and without the portmap lock, when the
//! shared chains are already in place (every ADD but a node's first).
//!
//! With iptables-nft the shared chains are checked over netlink, and the
//! transaction is one nf_tables batch sent on the same socket
//! ([`add_nft`]): `NFT_MSG_NEWCHAIN` (`NLM_F_EXCL`: the chain must be new)
//! then the rules, encoded by `cni_fw::iptables_nft` as iptables-nft 1.8.9
//! encodes [`add_fast_lines`]' lines (the tests compare the bytes with
//! `iptables-restore`'s, captured, and the kernel's listings after each).
//! No tool runs. Where the rules cannot be encoded exactly (the user's
//! conditions), those lines go to one `iptables-restore`. With legacy
//! iptables it is one `iptables-restore` of the lines, the shared chains
//! checked by `-C` lines in it. Anything unexpected fails the transaction
//! as a whole, and the caller takes the general path
//! ([`crate::ipt::add`]: an `iptables-save` and an `iptables-restore`
//! under the lock).
//!
//! Deleting this module and its one call in `add.rs` leaves a working
//! plugin.
//!
//! Measured on the 2-core development VM at a load average of 15-17
//! (other builds running), against builds without the path
//! (scripts/bench, 40 interleaved runs a side under /work/bench.lock,
//! medians; one invocation's counts from `strace -c -f` and callgrind
//! with `--trace-children=yes`, the shared chains in place), when the
//! transaction was always an `iptables-restore`:
//!
//! | `portmap` ADD | this path | general path | ratio |
//! |---|---|---|---|
//! | 1 mapping, wall | 7.0 ms | 11.9 ms | 0.59x |
//! | 50 mappings, wall | 19.0 ms | 20.5 ms | 0.93x |
//! | processes (plugin + tools) | 2 | 3 | |
//! | system calls | 308 | 551 | 0.56x |
//! | instructions | 1.54 M | 2.73 M | 0.56x |
//!
//! The nf_tables batch against that `iptables-restore` with iptables-nft
//! (release builds of 1ae435d and of this change, copied to /tmp, the
//! instructions as of 03823ee;
//! scripts/bench with `RCNI_REF_DIR` at the former, 30 interleaved runs a
//! side under /work/bench.lock at a load average of 7-9, medians; counts
//! by `scripts/bench --count`):
//!
//! | `portmap` ADD | netlink batch | `iptables-restore` | ratio |
//! |---|---|---|---|
//! | 1 mapping, wall | 0.88 ms | 2.34 ms | 0.38x |
//! | 50 mappings, wall | 5.84 ms | 7.05 ms | 0.83x |
//! | processes (plugin + tools) | 1 | 2 | |
//! | 1 mapping: system calls | 122 | 348 | 0.35x |
//! | 1 mapping: instructions | 0.89 M | 1.63 M | 0.54x |
//! | 50 mappings: system calls | 126 | 354 | 0.36x |
//! | 50 mappings: instructions | 14.5 M | 9.36 M | 1.55x |
//!
//! Encoding a rule with netlink-packet-netfilter's types cost about
//! 90 K instructions (allocations, and the crate's emit measuring nested
//! attributes again at each level): 50 mappings (154 rules) took more
//! instructions in user space than iptables-restore's C parser, still
//! less wall time than starting the tool. Written in one pass by
//! `cni_net::Attrs` (see `cni_fw::nf_gaps`), the same bytes (the test
//! `pe_bench_batches_are_the_bytes_sent_before`), the whole ADD of 50
//! mappings takes 2.9 M instructions (14.4 M before; 1 mapping 0.44 M,
//! 0.75 M before; static release builds under callgrind). The path cost
//! portmap's release binary 21,152
//! bytes (1,160,640 -> 1,181,792: the rule encoder, which portmap did not
//! link before) and firewall's 12,800 (805,120 -> 817,920: `XtRule`'s new
//! forms), both built by 351e3cf's scripts/build-release from 1ae435d and
//! from this change on it.

use crate::config::Conf;
use crate::ipt::{
    DNAT_CHAIN, MASQ_CHAIN, SETMARK_CHAIN, TABLE, container_rules, container_xt, dnat_entry_rule,
    family, masq_rule, postrouting_rule, restore, setmark_rule,
};
use cni_fw::iptables;
use cni_fw::nf_tables::{NfTables, RuleSummary};
use ipnetwork::IpNetwork;

/// The one transaction that sets up `addr`'s forwarding when the shared
/// chains are already in place and the container has no chain yet (the
/// common case): it creates (`-N`) the container's chain and fills it, after
/// checking (`-C`, when `check_shared`) the shared rules. Any surprise makes
/// it fail as a whole, changing nothing.
pub fn add_fast_lines(
    conf: &Conf,
    container_id: &str,
    addr: IpNetwork,
    check_shared: bool,
) -> Vec<String> {
    let c = container_rules(conf, container_id, addr);
    let mut lines = Vec::new();
    if check_shared {
        if conf.snat && conf.external_set_mark_chain.is_none() {
            lines.push(format!(
                "-C {SETMARK_CHAIN} {}",
                setmark_rule(conf.mark_bit)
            ));
            lines.push(format!("-C {MASQ_CHAIN} {}", masq_rule(conf.mark_bit)));
            lines.push(format!("-C POSTROUTING {}", postrouting_rule()));
        }
        for chain in ["PREROUTING", "OUTPUT"] {
            lines.push(format!("-C {chain} {}", dnat_entry_rule()));
        }
    }
    lines.push(format!("-N {}", c.chain));
    lines.extend(c.rules.iter().map(|r| format!("-A {} {r}", c.chain)));
    lines.extend(c.entries.iter().map(|r| format!("-A {DNAT_CHAIN} {r}")));
    lines
}

/// With iptables-nft: whether the shared chains and rules are in place,
/// read over netlink (`-C` in the transaction would make iptables-restore
/// fetch every rule of the table, which grows with the number of
/// containers). `None` when it cannot tell.
fn shared_ready_nft(conf: &Conf, nf: &mut NfTables) -> Option<bool> {
    let jumps_to = |rules: &[RuleSummary], target: &str| {
        rules.iter().any(|r| r.jumps.iter().any(|j| j == target))
    };
    // A jump to CNI-HOSTPORT-DNAT means the chain exists: nf_tables
    // refuses a jump to a missing chain and the deletion of a chain that
    // is jumped to (and the batch, which appends to it, would fail as a
    // whole). Asking for it as well was one more round trip.
    for chain in ["PREROUTING", "OUTPUT"] {
        if !jumps_to(&nf.chain_rules(TABLE, chain).ok()?, DNAT_CHAIN) {
            return Some(false);
        }
    }
    if conf.snat && conf.external_set_mark_chain.is_none() {
        if !jumps_to(&nf.chain_rules(TABLE, "POSTROUTING").ok()?, MASQ_CHAIN) {
            return Some(false);
        }
        let bit = (1u32 << conf.mark_bit).to_ne_bytes();
        let xt_mark = [bit, bit].concat();
        let is_mark = |info: &[u8]| info.get(..8) == Some(&xt_mark[..]);
        let setmark = nf.chain_rules(TABLE, SETMARK_CHAIN).ok()?;
        if !setmark
            .iter()
            .any(|r| r.xt_targets.iter().any(|(n, i)| n == "MARK" && is_mark(i)))
        {
            return Some(false);
        }
        let masq = nf.chain_rules(TABLE, MASQ_CHAIN).ok()?;
        let ok = masq.iter().any(|r| {
            let masquerades = r.exprs.iter().any(|e| e == "masq")
                || r.xt_targets.iter().any(|(n, _)| n == "MASQUERADE");
            let marked = r.values.iter().any(|v| v[..] == bit[..])
                || r.xt_matches.iter().any(|(n, i)| n == "mark" && is_mark(i));
            masquerades && marked
        });
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

/// With iptables-nft, when the shared chains are in place: the
/// container's chain, its rules and its entries in one nf_tables batch over
/// netlink, encoded as iptables-nft 1.8.9 encodes the lines of
/// [`add_fast_lines`] (no tool runs). `None` when they cannot be encoded
/// exactly (the user's conditions, whose text is up to iptables; an
/// address of prefix 0): the caller then runs those lines.
fn add_nft(conf: &Conf, container_id: &str, addr: IpNetwork, nf: &mut NfTables) -> Option<bool> {
    if !conf.conditions(addr.is_ipv6()).is_empty() {
        return None;
    }
    let (chain, mut rules, entries) = container_xt(conf, container_id, addr);
    rules.extend(entries);
    match nf.new_chain_with_rules(TABLE, &chain, &rules)? {
        Ok(()) => Some(true),
        Err(e) => {
            log::debug!("fast path not taken: {e}");
            Some(false)
        }
    }
}

/// Sets up forwarding to `addr` (one family) with the fast transaction,
/// when it applies: true when done. It needs no lock: it only creates the
/// container's own chain (which fails when the chain exists) and appends
/// to it and to the shared DNAT chain, all in one transaction that fails
/// as a whole (changing nothing) when the shared chains are not as it
/// expects; with iptables-nft the transaction is one nf_tables batch
/// ([`add_nft`]; or iptables-restore's, which retries one that raced
/// another), and legacy iptables takes the xtables lock (`-w`).
pub fn add(conf: &Conf, container_id: &str, addr: IpNetwork) -> bool {
    let v6 = addr.is_ipv6();
    let lines = if iptables::is_nft_variant(family(v6)) {
        let Ok(mut nf) = NfTables::open(family(v6)) else {
            return false;
        };
        if shared_ready_nft(conf, &mut nf) != Some(true) {
            return false;
        }
        if let Some(done) = add_nft(conf, container_id, addr, &mut nf) {
            return done;
        }
        add_fast_lines(conf, container_id, addr, false)
    } else {
        add_fast_lines(conf, container_id, addr, true)
    };
    match restore(v6, &lines) {
        Ok(()) => true,
        Err(e) => {
            log::debug!("fast path not taken: {}", e.msg);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::config::parse_text as parse;

    /// The configurations (and container addresses) whose fast-path
    /// batches were captured from iptables-restore: every rule form the
    /// path writes.
    fn cases(v6: bool) -> Vec<(Conf, &'static str, IpNetwork)> {
        let conf = |extra: &str, maps: &str| {
            parse(
                format!(r#"{{"name":"ndnet","runtimeConfig":{{"portMappings":[{maps}]}}{extra}}}"#)
                    .as_bytes(),
            )
            .unwrap()
        };
        let host_ip = if v6 { "fd00:184::1" } else { "10.184.0.1" };
        let a = conf(
            "",
            &format!(
                r#"{{"hostPort":8080,"containerPort":80,"protocol":"tcp"}},
                {{"hostPort":5353,"containerPort":53,"protocol":"udp","hostIP":"{host_ip}"}},
                {{"hostPort":9000,"containerPort":9000,"protocol":"sctp"}}"#
            ),
        );
        let b = conf(
            r#","externalSetMarkChain":"NDMARK""#,
            r#"{"hostPort":80,"containerPort":8080,"protocol":"tcp"},
            {"hostPort":443,"containerPort":443,"protocol":"tcp"}"#,
        );
        let many: Vec<String> = (1..=16)
            .map(|i| {
                format!(
                    r#"{{"hostPort":{},"containerPort":{},"protocol":"tcp"}}"#,
                    7000 + i,
                    100 + i
                )
            })
            .collect();
        let c = conf(r#","masqAll":true"#, &many.join(","));
        let addrs: [&str; 3] = if v6 {
            ["fd00:184::2/64", "fd00:184:10::2/60", "fd00:185::2/128"]
        } else {
            ["10.184.0.2/24", "10.184.16.2/20", "10.185.0.2/16"]
        };
        vec![
            (a, "ndcid", addrs[0].parse().unwrap()),
            (b, "ndcid2", addrs[1].parse().unwrap()),
            (c, "ndcid3", addrs[2].parse().unwrap()),
        ]
    }

    /// The captured batches of [`cases`] for a family: per case, each
    /// message's (type, flags, body).
    fn captured(v6: bool) -> Vec<Vec<(u16, u16, Vec<u8>)>> {
        let text = if v6 {
            include_str!("testdata/iptables-nft-1.8.9-fast-add-v6.hex")
        } else {
            include_str!("testdata/iptables-nft-1.8.9-fast-add-v4.hex")
        };
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let mut cases = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if line == "--" {
                cases.push(Vec::new());
                continue;
            }
            let f: Vec<&str> = line.split(' ').collect();
            let n = |s: &str| u16::from_str_radix(s, 16).unwrap();
            cases
                .last_mut()
                .unwrap()
                .push((n(f[0]), n(f[1]), hex(f[2])));
        }
        cases
    }

    /// Our batch for each case is iptables-restore's, message by message,
    /// byte for byte: the chain (`NLM_F_EXCL`), then every rule
    /// (`NLM_F_CREATE | NLM_F_APPEND`, the last one also asking for the
    /// ACK).
    fn encodes_as_iptables_nft_1_8_9(v6: bool) {
        let theirs = captured(v6);
        let cases = cases(v6);
        assert_eq!(theirs.len(), cases.len());
        for ((conf, cid, addr), want) in cases.iter().zip(&theirs) {
            let mut nf = NfTables::capture(family(v6));
            assert_eq!(add_nft(conf, cid, *addr, &mut nf), Some(true));
            let sent = nf.captured();
            let [batch] = sent.as_slice() else {
                panic!("one datagram: {sent:?}")
            };
            let mut msgs = Vec::new();
            let mut at = 0;
            while at < batch.len() {
                let len = u32::from_ne_bytes(batch[at..at + 4].try_into().unwrap()) as usize;
                msgs.push(&batch[at..at + len]);
                at += (len + 3) & !3;
            }
            // BEGIN and END around ours (iptables' BEGIN also carries the
            // generation its cache read, which we have no use for).
            let ours = &msgs[1..msgs.len() - 1];
            assert_eq!(ours.len(), want.len(), "{cid}: messages");
            for (i, (msg, (kind, flags, body))) in ours.iter().zip(want).enumerate() {
                let ack = if i == want.len() - 1 { 0x04 } else { 0 };
                assert_eq!(
                    u16::from_ne_bytes([msg[4], msg[5]]),
                    *kind,
                    "{cid} {i}: type"
                );
                assert_eq!(
                    u16::from_ne_bytes([msg[6], msg[7]]),
                    flags | ack,
                    "{cid} {i}: flags"
                );
                assert_eq!(&msg[16..], &body[..], "{cid} {i}: body");
            }
        }
    }

    #[test]
    fn encodes_v4_as_iptables_nft_1_8_9() {
        encodes_as_iptables_nft_1_8_9(false);
    }

    #[test]
    fn encodes_v6_as_iptables_nft_1_8_9() {
        encodes_as_iptables_nft_1_8_9(true);
    }

    /// The batches of `scripts/bench`'s portmap ADD rows (tcp hostPorts
    /// 9000, 9001, … to containerPort 80, the masquerade marks on; the
    /// container at 10.249.0.2/24, and at fd00:249::2/64 for IPv6), 1 and
    /// 50 mappings, are byte for byte (sequence numbers and port ids
    /// aside) what 6e46308 sent before the rules' expressions were written
    /// in one pass (`cni_net::Attrs`): the SHA-512 of their hex, taken
    /// from 6e46308's encoder. The kernel receives the same messages, the
    /// same rules in the same order.
    #[test]
    fn pe_bench_batches_are_the_bytes_sent_before() {
        let want = [
            (
                false,
                1,
                "a11bf51452fbee8a0b88a1f404b01bf02b1c91e231f9e928385c394561a36ba78896c36fe0912f536c23ab89a8affb9dd974611daa52c26dfc714de8d2456984",
            ),
            (
                false,
                50,
                "aca931c8f8a7189cb7d3e7e08977e104c74e18d1d13e92e61ca6d1f83e9726ef6dba6b276699831208040dc15a95b9b941a4d1e58c443d29ef23cb3f9e0823e2",
            ),
            (
                true,
                1,
                "34adac4032037d3044dfd7f04407492c2912e14852051d08b3ba352e476f3a5902d1185455a694d3b9123d84666c251761dc3863b33887a5eee159dfa78463ad",
            ),
            (
                true,
                50,
                "29ac9d80bdd782ac6889997cd8dc6631244d0bcc02b873cfd9ee33ac66085ca35cbefdd83416441696582f82ee32137543b4cbac33653c55a47a682bfaf23771",
            ),
        ];
        let mut got = Vec::new();
        for (v6, n, _) in want {
            let maps: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        r#"{{"hostPort":{},"containerPort":80,"protocol":"tcp"}}"#,
                        9000 + i
                    )
                })
                .collect();
            let conf = parse(
                format!(
                    r#"{{"name":"bench-pm","runtimeConfig":{{"portMappings":[{}]}}}}"#,
                    maps.join(",")
                )
                .as_bytes(),
            )
            .unwrap();
            let addr = if v6 {
                "fd00:249::2/64"
            } else {
                "10.249.0.2/24"
            };
            let mut nf = NfTables::capture(family(v6));
            assert_eq!(
                add_nft(&conf, "bench-pm", addr.parse().unwrap(), &mut nf),
                Some(true)
            );
            let mut sent = nf.captured().concat();
            let mut at = 0;
            let mut msgs = 0;
            while at < sent.len() {
                let len = u32::from_ne_bytes(sent[at..at + 4].try_into().unwrap()) as usize;
                sent[at + 8..at + 16].fill(0);
                at += (len + 3) & !3;
                msgs += 1;
            }
            // BEGIN, the chain, per mapping 2 marking rules and the DNAT,
            // one CNI-HOSTPORT-DNAT entry per 15 ports, END.
            assert_eq!(msgs, 2 + 1 + (3 - usize::from(v6)) * n + n.div_ceil(15));
            got.push(cni_fw::hash::sha512_hex(&cni_fw::hash::hex(&sent)));
        }
        let want: Vec<&str> = want.iter().map(|w| w.2).collect();
        assert_eq!(got, want);
    }

    /// What the fast path cannot encode exactly goes to iptables-restore:
    /// nothing is sent.
    #[test]
    fn conditions_and_a_zero_prefix_are_left_to_iptables_restore() {
        for v6 in [false, true] {
            let (mut conf, cid, addr) = cases(v6).remove(0);
            let mut nf = NfTables::capture(family(v6));
            let zero = IpNetwork::new(addr.ip(), 0).unwrap();
            assert_eq!(add_nft(&conf, cid, zero, &mut nf), None);
            conf.conditions_v4 = vec!["-m".into(), "addrtype".into()];
            conf.conditions_v6 = conf.conditions_v4.clone();
            assert_eq!(add_nft(&conf, cid, addr, &mut nf), None);
            assert!(nf.captured().is_empty());
        }
    }

    /// `iptables-save -t nat` of a family without its comment lines and
    /// counters, and nft's listing of that table with its expressions.
    fn listing(v6: bool) -> (String, String) {
        let run = |cmd: &str, args: &[&str]| {
            let out = std::process::Command::new(cmd).args(args).output().unwrap();
            assert!(out.status.success(), "{cmd} {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let save = run(
            if v6 {
                "ip6tables-save"
            } else {
                "iptables-save"
            },
            &["-t", "nat"],
        );
        let save: Vec<&str> = save.lines().filter(|l| !l.starts_with('#')).collect();
        let nft = run(
            "nft",
            &[
                "--debug=netlink",
                "list",
                "table",
                if v6 { "ip6" } else { "ip" },
                "nat",
            ],
        );
        // Handles and positions differ by history.
        let nft: Vec<String> = nft
            .lines()
            .map(|l| l.split(" # handle").next().unwrap_or(l).to_string())
            .filter(|l| !l.starts_with("ip"))
            .collect();
        (save.join("\n"), nft.join("\n"))
    }

    /// The fast path over netlink leaves the kernel with what
    /// iptables-restore leaves for the same lines (the same `iptables-save`
    /// text, the same expressions), and portmap's CHECK and DEL take it as
    /// their own.
    fn stores_what_iptables_restore_stores(v6: bool) {
        let skip =
            rcni_tests::skip_unless_root("ipt_fast_add::nd_stores_what_iptables_restore_stores")
                || !iptables::is_nft_variant(family(v6));
        if skip {
            return;
        }
        let mut got = Vec::new();
        for ours in [false, true] {
            let ns = cni_net::NetNs::new_anonymous().unwrap();
            got.push(
                ns.run(|| {
                    // The administrator's chain of case 1.
                    restore(v6, &["-N NDMARK".to_string()]).unwrap();
                    for (conf, cid, addr) in cases(v6) {
                        // Another container first: the shared chains.
                        crate::ipt::add(&conf, "nd_first", addr).unwrap();
                        if ours {
                            let mut nf = NfTables::open(family(v6)).unwrap();
                            assert_eq!(shared_ready_nft(&conf, &mut nf), Some(true));
                            assert_eq!(add_nft(&conf, cid, addr, &mut nf), Some(true));
                            // A second ADD of the container adds nothing.
                            assert_eq!(add_nft(&conf, cid, addr, &mut nf), Some(false));
                        } else {
                            restore(v6, &add_fast_lines(&conf, cid, addr, false)).unwrap();
                        }
                        let table = crate::ipt::save(v6).unwrap();
                        crate::ipt::check_table(&conf, cid, addr, &table).unwrap();
                    }
                    let before = listing(v6);
                    for (conf, cid, _) in cases(v6) {
                        crate::ipt::del_in(&conf, cid, &[v6]).unwrap();
                        let chain = crate::ipt::dnat_chain(&conf.network, cid);
                        assert!(!crate::ipt::save(v6).unwrap().has_chain(&chain));
                    }
                    before
                })
                .unwrap(),
            );
        }
        assert_eq!(got[0], got[1]);
        let chain = crate::ipt::dnat_chain("ndnet", "ndcid");
        let (save, _) = &got[1];
        let want = if v6 {
            format!(
                "-A {chain} -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00:184::2]:80"
            )
        } else {
            format!("-A {chain} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.184.0.2:80")
        };
        assert!(save.lines().any(|l| l == want), "{save}");
    }

    #[test]
    fn nd_v4_stores_what_iptables_restore_stores() {
        stores_what_iptables_restore_stores(false);
    }

    #[test]
    fn nd_v6_stores_what_iptables_restore_stores() {
        stores_what_iptables_restore_stores(true);
    }

    /// ADDs at once, over netlink (the shared chains in place), some of
    /// them of the same container: none fails (the one whose chain another
    /// made first takes the general path, as `add.rs` does), and each
    /// container has its rules and entries once.
    #[test]
    fn nd_concurrent_adds_neither_fail_nor_double() {
        let skip = rcni_tests::skip_unless_root(
            "ipt_fast_add::nd_concurrent_adds_neither_fail_nor_double",
        ) || !iptables::is_nft_variant(family(false));
        if skip {
            return;
        }
        let (conf, _, _) = cases(false).remove(0);
        let ns = cni_net::NetNs::new_anonymous().unwrap();
        let addr = |i: usize| -> IpNetwork { format!("10.186.0.{}/24", 10 + i).parse().unwrap() };
        let took_netlink = ns
            .run(|| {
                crate::ipt::add(&conf, "nd_first", addr(0)).unwrap();
                let start = std::sync::Barrier::new(12);
                std::thread::scope(|s| {
                    let runs: Vec<_> = (0..12)
                        .map(|i| {
                            let (conf, start) = (&conf, &start);
                            // Six containers, each ADDed twice at once.
                            s.spawn(move || {
                                let (cid, a) = (format!("nd_c{}", i % 6), addr(1 + i % 6));
                                start.wait();
                                let fast = add(conf, &cid, a);
                                if !fast {
                                    crate::ipt::add(conf, &cid, a).unwrap();
                                }
                                fast
                            })
                        })
                        .collect();
                    runs.into_iter()
                        .filter_map(|r| r.join().unwrap().then_some(()))
                        .count()
                })
            })
            .unwrap();
        assert!(took_netlink >= 6, "{took_netlink} fast ADDs");
        let table = ns.run(|| crate::ipt::save(false).unwrap()).unwrap();
        for i in 0..6 {
            let cid = format!("nd_c{i}");
            crate::ipt::check_table(&conf, &cid, addr(1 + i), &table).unwrap();
            let c = container_rules(&conf, &cid, addr(1 + i));
            assert_eq!(table.rules(&c.chain).count(), c.rules.len(), "{cid}");
            let jump = format!(" -j {}", c.chain);
            let entries = table
                .rules(DNAT_CHAIN)
                .filter(|r| r.ends_with(&jump))
                .count();
            assert_eq!(entries, c.entries.len(), "{cid}");
        }
    }
}
