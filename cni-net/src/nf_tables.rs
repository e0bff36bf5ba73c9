//! nf_tables over netlink, in the calling thread's namespace: whether a
//! chain exists, a summary of a chain's rules (for instance of chains that
//! `iptables-nft` created), and deleting rules by handle in one
//! transaction, without running a tool. Messages are
//! netlink-packet-netfilter's types ([`crate::nl::nfm`]).

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::Socket;
use crate::nl::gaps::nla_value;
use crate::nl::nfm::{BatchEdge, Nfm, SUBSYS_NFTABLES};
use netlink_packet_core::Nla;
use netlink_packet_netfilter::nftables::{
    Bitwise, ChainAttribute, ChainMessage, Cmp, DataAttribute, ExpressionAttribute, Expressions,
    Immediate, ListAttribute, Payload, RuleAttribute, RuleMessage, VerdictAttribute,
};

const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
/// `NFTA_MATCH_NAME`/`NFTA_TARGET_NAME` and `…_INFO`: netlink-packet-netfilter
/// 0.4 has no `match`/`target` expression types (they come as
/// `Expressions::Other` with untyped attributes).
const NFTA_XT_NAME: u16 = 1;
const NFTA_XT_INFO: u16 = 3;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b.split(|c| *c == 0).next().unwrap_or_default()).into_owned()
}

/// What one rule does, as far as these queries need to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSummary {
    /// The kernel handle.
    pub handle: u64,
    /// Expression names in order (`meta`, `cmp`, `immediate`, `match`, …).
    pub exprs: Vec<String>,
    /// Chains jumped to or gone to (verdicts of `immediate` expressions).
    pub jumps: Vec<String>,
    /// x_tables compat matches: (name, info blob).
    pub xt_matches: Vec<(String, Vec<u8>)>,
    /// x_tables compat targets: (name, info blob).
    pub xt_targets: Vec<(String, Vec<u8>)>,
    /// Constant values of `immediate`, `bitwise` (mask, xor) and `cmp`.
    pub values: Vec<Vec<u8>>,
    /// What `payload` expressions load: (base, offset, length); base 1 is
    /// the network header.
    pub payloads: Vec<(u32, u32, u32)>,
    /// Verdict codes of `immediate` expressions (1 accept, 0 drop, -3 jump,
    /// -4 goto, -5 return).
    pub verdicts: Vec<i32>,
}

/// An nf_tables address family: nft's `ip`, `ip6` and `inet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfFamily {
    /// `ip` (where iptables-nft keeps its IPv4 tables).
    Ip,
    /// `ip6` (ip6tables-nft's).
    Ip6,
    /// `inet`: both at once.
    Inet,
}

impl From<IpFamily> for NfFamily {
    fn from(f: IpFamily) -> Self {
        match f {
            IpFamily::V4 => NfFamily::Ip,
            IpFamily::V6 => NfFamily::Ip6,
        }
    }
}

/// NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6.
fn nfproto(family: NfFamily) -> u8 {
    match family {
        NfFamily::Inet => 1,
        NfFamily::Ip => 2,
        NfFamily::Ip6 => 10,
    }
}

/// A netlink socket for nf_tables queries in one address family.
pub struct NfTables {
    sock: Socket,
    af: u8,
}

impl NfTables {
    /// Opens a socket in the calling thread's namespace for `family`'s tables.
    pub fn open(family: impl Into<NfFamily>) -> Result<NfTables, NetError> {
        let af = nfproto(family.into());
        Ok(NfTables {
            sock: Socket::open(netlink_sys::protocols::NETLINK_NETFILTER, "nf_tables")?,
            af,
        })
    }

    /// True when `chain` exists in `table`. A missing table is `false`.
    pub fn chain_exists(&mut self, table: &str, chain: &str) -> Result<bool, NetError> {
        let req = ChainMessage {
            attributes: vec![
                ChainAttribute::Table(table.to_string()),
                ChainAttribute::Name(chain.to_string()),
            ],
        };
        let kind = (SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN;
        // An answer means it exists; nothing in it is read.
        let op = format!("get chain {table} {chain}");
        match self.sock.ack(&Nfm(kind, self.af, req), 0, &op) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The rules of `chain` in `table`, in order; none when the chain or
    /// table does not exist.
    pub fn chain_rules(&mut self, table: &str, chain: &str) -> Result<Vec<RuleSummary>, NetError> {
        let req = RuleMessage {
            attributes: vec![
                RuleAttribute::Table(table.to_string()),
                RuleAttribute::Chain(chain.to_string()),
            ],
        };
        let kind = (SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE;
        let got = self.sock.dump(
            || Nfm(kind, self.af, req.clone()),
            &format!("list rules of {table} {chain}"),
            |Nfm(kind, _, rule): Nfm<RuleMessage>| {
                let of_chain = rule
                    .attributes
                    .iter()
                    .any(|a| matches!(a, RuleAttribute::Chain(c) if c == chain));
                (kind & 0xff == NFT_MSG_NEWRULE && of_chain).then(|| summarize(rule))
            },
        );
        match got {
            Ok(rules) => Ok(rules),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// Deleting rules by handle (the firewall plugin's DEL, instead of an
/// `iptables-restore` run).
impl NfTables {
    /// Deletes the rules `rules` (family, chain, kernel handle) of the
    /// tables called `table` in one transaction: all of them, or none when
    /// one fails (a rule already gone: `ENOENT`). Handles are never reused
    /// within a table, so a handle read earlier names that rule or none.
    pub fn delete_rules(
        &mut self,
        table: &str,
        rules: &[(NfFamily, &str, u64)],
    ) -> Result<(), NetError> {
        const NFT_MSG_DELRULE: u16 = 8;
        let kind = (SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE;
        let msgs: Vec<Nfm<RuleMessage>> = rules
            .iter()
            .map(|(family, chain, handle)| {
                let rule = RuleMessage {
                    attributes: vec![
                        RuleAttribute::Table(table.to_string()),
                        RuleAttribute::Chain(chain.to_string()),
                        RuleAttribute::Handle(*handle),
                    ],
                };
                Nfm(kind, nfproto(*family), rule)
            })
            .collect();
        let edge = |end| BatchEdge {
            end,
            subsys: SUBSYS_NFTABLES,
        };
        self.sock.batch(
            &edge(false),
            &msgs,
            &edge(true),
            &format!("delete {} rules of {table}", rules.len()),
        )
    }
}

/// The bytes of an `NFTA_DATA_VALUE`.
fn value_of(data: &DataAttribute) -> Option<Vec<u8>> {
    match data {
        DataAttribute::Value(v) => Some(v.clone()),
        _ => None,
    }
}

fn summarize(rule: RuleMessage) -> RuleSummary {
    let mut out = RuleSummary::default();
    for attr in rule.attributes {
        match attr {
            RuleAttribute::Handle(h) => out.handle = h,
            RuleAttribute::Expressions(list) => {
                for elem in list {
                    if let ListAttribute::Element(parts) = elem {
                        expression(&mut out, parts);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Adds one expression (its name and data attributes) to `out`.
fn expression(out: &mut RuleSummary, parts: Vec<ExpressionAttribute>) {
    let mut name = String::new();
    let mut data = None;
    for p in parts {
        match p {
            ExpressionAttribute::Name(n) => name = n,
            ExpressionAttribute::Data(d) => data = Some(d),
            _ => {}
        }
    }
    match data {
        Some(Expressions::Immediate(imm)) => {
            for i in imm {
                match i {
                    Immediate::Data(DataAttribute::Verdict(v)) => {
                        for a in v {
                            match a {
                                VerdictAttribute::Chain(c) => out.jumps.push(c),
                                VerdictAttribute::Code(code) => {
                                    out.verdicts.push(u32::from(code) as i32)
                                }
                                _ => {}
                            }
                        }
                    }
                    Immediate::Data(d) => out.values.extend(value_of(&d)),
                    _ => {}
                }
            }
        }
        Some(Expressions::Bitwise(bits)) => {
            for b in bits {
                if let Bitwise::Mask(d) | Bitwise::Xor(d) = b {
                    out.values.extend(value_of(&d));
                }
            }
        }
        Some(Expressions::Cmp(cmp)) => {
            for c in cmp {
                if let Cmp::Data(d) = c {
                    out.values.extend(value_of(&d));
                }
            }
        }
        Some(Expressions::Payload(load)) => {
            let (mut base, mut offset, mut len) = (u32::MAX, u32::MAX, u32::MAX);
            for p in load {
                match p {
                    Payload::Base(v) => base = v,
                    Payload::Offset(v) => offset = v,
                    Payload::Len(v) => len = v,
                    _ => {}
                }
            }
            out.payloads.push((base, offset, len));
        }
        Some(Expressions::Other { attributes, .. }) if name == "match" || name == "target" => {
            let field = |kind: u16| {
                attributes
                    .iter()
                    .find(|a| a.kind() & !netlink_packet_core::NLA_F_NESTED == kind)
                    .map(nla_value)
                    .unwrap_or_default()
            };
            let xt = (text(&field(NFTA_XT_NAME)), field(NFTA_XT_INFO));
            if name == "match" {
                out.xt_matches.push(xt);
            } else {
                out.xt_targets.push(xt);
            }
        }
        _ => {}
    }
    out.exprs.push(name);
}

/// True when chain `chain` exists in nf_tables table `table` of `family`.
/// A missing table or chain is `false`.
pub fn chain_exists(
    family: impl Into<NfFamily>,
    table: &str,
    chain: &str,
) -> Result<bool, NetError> {
    NfTables::open(family)?.chain_exists(table, chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_in_a_fresh_namespace() {
        if !crate::testutil::is_root() {
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        let got = ns
            .run(|| chain_exists(IpFamily::V4, "nat", "CNI-NOPE"))
            .unwrap();
        assert!(!got.unwrap());
    }

    #[test]
    fn reads_rules_of_iptables_nft_chains() {
        use std::process::Command;
        if crate::testutil::skip_unless_root("nf_tables::reads_rules_of_iptables_nft_chains") {
            return;
        }
        if Command::new("iptables-nft-restore")
            .arg("--version")
            .output()
            .is_err()
        {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIP nf_tables::reads_rules_of_iptables_nft_chains: no iptables-nft-restore (package iptables)"
            );
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        let rules = ns
            .run(|| {
                let mut child = Command::new("iptables-nft-restore")
                    .args(["--noflush", "-w"])
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(b"*nat\n:MARKS - [0:0]\n:MQ - [0:0]\n-A MARKS -m comment --comment x -j MARK --set-xmark 0x2000/0x2000\n-A MQ -m mark --mark 0x2000/0x2000 -j MASQUERADE\n-A PREROUTING -m addrtype --dst-type LOCAL -j MARKS\nCOMMIT\n")
                    .unwrap();
                assert!(child.wait().unwrap().success());
                let mut nf = NfTables::open(IpFamily::V4).unwrap();
                assert!(nf.chain_exists("nat", "MARKS").unwrap());
                assert!(!nf.chain_exists("nat", "NOPE").unwrap());
                assert!(nf.chain_rules("nat", "NOPE").unwrap().is_empty());
                (
                    nf.chain_rules("nat", "PREROUTING").unwrap(),
                    nf.chain_rules("nat", "MARKS").unwrap(),
                    nf.chain_rules("nat", "MQ").unwrap(),
                )
            })
            .unwrap();
        let (pre, marks, mq) = rules;
        assert_eq!(pre.len(), 1);
        assert_eq!(pre[0].jumps, vec!["MARKS"]);
        assert!(pre[0].handle > 0);
        let mark = 0x2000u32.to_ne_bytes();
        // iptables-nft keeps MARK as an x_tables target: info = mark, mask.
        let t = marks[0]
            .xt_targets
            .iter()
            .find(|(n, _)| n == "MARK")
            .expect("MARK target");
        assert_eq!(&t.1[..8], &[mark, mark].concat()[..]);
        // `-m mark` may be native (meta, bitwise, cmp) or an x_tables match.
        let m = &mq[0];
        assert!(
            m.exprs.contains(&"masq".to_string())
                || m.xt_targets.iter().any(|(n, _)| n == "MASQUERADE"),
            "{m:?}"
        );
        assert!(
            m.values.iter().any(|v| v[..] == mark[..])
                || m.xt_matches.iter().any(|(n, _)| n == "mark"),
            "{m:?}"
        );
    }
    #[test]
    fn deletes_rules_by_handle_all_or_none() {
        use std::process::Command;
        if crate::testutil::skip_unless_root("nf_tables::deletes_rules_by_handle_all_or_none") {
            return;
        }
        if Command::new("iptables-nft-restore")
            .arg("--version")
            .output()
            .is_err()
        {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIP nf_tables::deletes_rules_by_handle_all_or_none: no iptables-nft-restore (package iptables)"
            );
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        ns.run(|| {
            let mut child = Command::new("iptables-nft-restore")
                .args(["--noflush", "-w"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"*filter\n:T - [0:0]\n-A T -s 10.134.0.2/32 -j ACCEPT\n-A T -d 10.134.0.3/32 -j DROP\n-A T -s 10.134.0.4/32 -j RETURN\nCOMMIT\n")
                .unwrap();
            assert!(child.wait().unwrap().success());
            let mut child = Command::new("ip6tables-nft-restore")
                .args(["--noflush", "-w"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"*filter\n:T - [0:0]\n-A T -s fd21:134::2/128 -j ACCEPT\nCOMMIT\n")
                .unwrap();
            assert!(child.wait().unwrap().success());
            let mut nf6 = NfTables::open(IpFamily::V6).unwrap();
            let v6 = nf6.chain_rules("filter", "T").unwrap();
            assert_eq!(v6[0].payloads, [(1, 8, 16)]);
            let mut nf = NfTables::open(IpFamily::V4).unwrap();
            let rules = nf.chain_rules("filter", "T").unwrap();
            assert_eq!(rules.len(), 3);
            // Source at offset 12 of the IPv4 header, destination at 16.
            assert_eq!(rules[0].payloads, [(1, 12, 4)]);
            assert_eq!(rules[1].payloads, [(1, 16, 4)]);
            assert_eq!(rules[0].verdicts, [1]);
            assert_eq!(rules[1].verdicts, [0]);
            assert_eq!(rules[2].verdicts, [-5]);
            let (a, b, c) = (rules[0].handle, rules[1].handle, rules[2].handle);
            // One handle that does not exist: nothing is deleted.
            let gone = c + 1000;
            let ip = NfFamily::Ip;
            assert!(nf.delete_rules("filter", &[(ip, "T", a), (ip, "T", gone)]).is_err());
            assert_eq!(nf.chain_rules("filter", "T").unwrap().len(), 3);
            // Both families in one transaction.
            let ip6 = NfFamily::Ip6;
            nf.delete_rules("filter", &[(ip, "T", a), (ip6, "T", v6[0].handle), (ip, "T", c)])
                .unwrap();
            let left = nf.chain_rules("filter", "T").unwrap();
            assert_eq!(left.len(), 1);
            assert_eq!(left[0].handle, b);
            assert!(nf6.chain_rules("filter", "T").unwrap().is_empty());
            // Already gone.
            assert!(nf.delete_rules("filter", &[(ip, "T", a)]).is_err());
            // Not in the ip6 table of that name.
            assert!(nf.delete_rules("filter", &[(ip6, "T", b)]).is_err());
            nf.delete_rules("filter", &[]).unwrap();
        })
        .unwrap();
    }
}
