//! Read-only nf_tables queries over netlink, in the calling thread's
//! namespace: whether a chain exists, and a summary of a chain's rules (for
//! instance of chains that `iptables-nft` created), without running a tool.

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::{NETLINK_NETFILTER, Socket, gaps};
use netlink_packet_netfilter::nftables::{
    Bitwise, ChainAttribute, ChainMessage, Cmp, DataAttribute, ExpressionAttribute, Expressions,
    Immediate, ListAttribute, NfTablesMessage, RuleAttribute, RuleMessage, VerdictAttribute,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};

/// NFTA_MATCH_NAME/NFTA_TARGET_NAME and …_INFO share their numbers; the
/// crate has no type for them (`Expressions::Other`).
const NFTA_XT_NAME: u16 = 1;
const NFTA_XT_INFO: u16 = 3;

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

/// A netlink socket for nf_tables queries in one address family.
pub struct NfTables {
    sock: Socket<NetfilterMessage>,
    family: NetfilterProtoFamily,
}

impl NfTables {
    /// Opens a socket in the calling thread's namespace for `family`'s tables.
    pub fn open(family: impl Into<NfFamily>) -> Result<NfTables, NetError> {
        let family = match family.into() {
            NfFamily::Inet => NetfilterProtoFamily::Inet,
            NfFamily::Ip => NetfilterProtoFamily::IPv4,
            NfFamily::Ip6 => NetfilterProtoFamily::IPv6,
        };
        Ok(NfTables {
            sock: Socket::open(NETLINK_NETFILTER, "nf_tables")?,
            family,
        })
    }

    fn message(&self, inner: NfTablesMessage) -> NetfilterMessage {
        NetfilterMessage::new(NetfilterHeader::new(self.family, 0, 0), inner)
    }

    /// True when `chain` exists in `table`. A missing table is `false`.
    pub fn chain_exists(&mut self, table: &str, chain: &str) -> Result<bool, NetError> {
        let m = ChainMessage {
            attributes: vec![
                ChainAttribute::Table(table.to_string()),
                ChainAttribute::Name(chain.to_string()),
            ],
        };
        let req = self.message(NfTablesMessage::GetChain(m));
        match self.sock.get(&req, &format!("get chain {table} {chain}")) {
            Ok(found) => Ok(found.is_some()),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The rules of `chain` in `table`, in order; none when the chain or
    /// table does not exist.
    pub fn chain_rules(&mut self, table: &str, chain: &str) -> Result<Vec<RuleSummary>, NetError> {
        let req = self.message(NfTablesMessage::GetRule(RuleMessage {
            attributes: vec![
                RuleAttribute::Table(table.to_string()),
                RuleAttribute::Chain(chain.to_string()),
            ],
        }));
        let got = self.sock.dump(
            || req.clone(),
            &format!("list rules of {table} {chain}"),
            |m| match m.inner {
                NetfilterMessageInner::NfTables(NfTablesMessage::NewRule(r))
                    if r.attributes
                        .iter()
                        .any(|a| matches!(a, RuleAttribute::Chain(c) if c == chain)) =>
                {
                    Some(summarize(r.attributes))
                }
                _ => None,
            },
        );
        match got {
            Ok(rules) => Ok(rules),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// The bytes of an `NFTA_DATA_VALUE`.
fn push_value(values: &mut Vec<Vec<u8>>, data: &DataAttribute) {
    if let DataAttribute::Value(v) = data {
        values.push(v.clone());
    }
}

fn summarize(attributes: Vec<RuleAttribute>) -> RuleSummary {
    let mut out = RuleSummary::default();
    for a in attributes {
        match a {
            RuleAttribute::Handle(h) => out.handle = h,
            RuleAttribute::Expressions(list) => {
                for elem in list {
                    if let ListAttribute::Element(attrs) = elem {
                        expression(&mut out, attrs);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// One expression of a rule into the summary.
fn expression(out: &mut RuleSummary, attrs: Vec<ExpressionAttribute>) {
    let mut name = String::new();
    let mut data = None;
    for a in attrs {
        match a {
            ExpressionAttribute::Name(n) => name = n,
            ExpressionAttribute::Data(d) => data = Some(d),
            _ => {}
        }
    }
    match data {
        Some(Expressions::Immediate(imm)) => {
            for i in imm {
                if let Immediate::Data(d) = i {
                    if let DataAttribute::Verdict(v) = &d {
                        for va in v {
                            if let VerdictAttribute::Chain(c) = va {
                                out.jumps.push(c.clone());
                            }
                        }
                    }
                    push_value(&mut out.values, &d);
                }
            }
        }
        Some(Expressions::Bitwise(b)) => {
            for x in b {
                match x {
                    Bitwise::Mask(d) | Bitwise::Xor(d) => push_value(&mut out.values, &d),
                    _ => {}
                }
            }
        }
        Some(Expressions::Cmp(c)) => {
            for x in c {
                if let Cmp::Data(d) = x {
                    push_value(&mut out.values, &d);
                }
            }
        }
        Some(Expressions::Other {
            expression_type,
            attributes,
        }) if expression_type == "match" || expression_type == "target" => {
            let mut xt = (String::new(), Vec::new());
            for nla in &attributes {
                match gaps::nla_kind(nla) {
                    NFTA_XT_NAME => xt.0 = gaps::nla_text(nla),
                    NFTA_XT_INFO => xt.1 = gaps::nla_value(nla),
                    _ => {}
                }
            }
            if expression_type == "match" {
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
}
