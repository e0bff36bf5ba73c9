//! Read-only nf_tables queries over netlink, in the calling thread's
//! namespace: whether a chain exists, and a summary of a chain's rules (for
//! instance of chains that `iptables-nft` created), without running a tool.

use crate::IpFamily;
use crate::error::NetError;
use crate::nl::nfnl::{Conn, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, Request, attrs, find_attr};

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_HANDLE: u16 = 3;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
const NFTA_CMP_DATA: u16 = 3;
/// NFTA_MATCH_NAME/NFTA_TARGET_NAME and …_INFO share their numbers.
const NFTA_XT_NAME: u16 = 1;
const NFTA_XT_INFO: u16 = 3;

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

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
    conn: Conn,
    af: u8,
}

impl NfTables {
    /// Opens a socket in the calling thread's namespace for `family`'s tables.
    pub fn open(family: impl Into<NfFamily>) -> Result<NfTables, NetError> {
        Ok(NfTables {
            conn: Conn::open(netlink_sys::protocols::NETLINK_NETFILTER, "nf_tables")?,
            af: nfproto(family.into()),
        })
    }

    /// True when `chain` exists in `table`. A missing table is `false`.
    pub fn chain_exists(&mut self, table: &str, chain: &str) -> Result<bool, NetError> {
        let mut req = Request::new(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN,
            NLM_F_REQUEST | NLM_F_ACK,
            &[self.af, 0, 0, 0],
        );
        req.attr(NFTA_CHAIN_TABLE, &cstr(table));
        req.attr(NFTA_CHAIN_NAME, &cstr(chain));
        let mut found = false;
        match self
            .conn
            .request(req, &format!("get chain {table} {chain}"), |_, _| {
                found = true
            }) {
            Ok(()) => Ok(found),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The rules of `chain` in `table`, in order; none when the chain or
    /// table does not exist.
    pub fn chain_rules(&mut self, table: &str, chain: &str) -> Result<Vec<RuleSummary>, NetError> {
        let mut req = Request::new(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
            NLM_F_REQUEST | NLM_F_DUMP,
            &[self.af, 0, 0, 0],
        );
        req.attr(NFTA_RULE_TABLE, &cstr(table));
        req.attr(NFTA_RULE_CHAIN, &cstr(chain));
        let mut rules = Vec::new();
        let got = self.conn.request(
            req,
            &format!("list rules of {table} {chain}"),
            |kind, payload| {
                if kind & 0xff == NFT_MSG_NEWRULE
                    && let Some(body) = payload.get(4..)
                    && find_attr(body, NFTA_RULE_CHAIN).map(text).as_deref() == Some(chain)
                {
                    rules.push(summarize(body));
                }
            },
        );
        match got {
            Ok(()) => Ok(rules),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

fn be32(data: Option<&[u8]>) -> Option<u32> {
    match data? {
        &[a, b, c, d] => Some(u32::from_be_bytes([a, b, c, d])),
        _ => None,
    }
}

/// A `payload` expression's (base, offset, length).
fn payload_load(data: &[u8]) -> (u32, u32, u32) {
    let get = |kind| be32(find_attr(data, kind)).unwrap_or(u32::MAX);
    (
        get(NFTA_PAYLOAD_BASE),
        get(NFTA_PAYLOAD_OFFSET),
        get(NFTA_PAYLOAD_LEN),
    )
}

/// Pushes the NFTA_DATA_VALUE inside a nested `NFTA_DATA_*` attribute.
fn push_value(values: &mut Vec<Vec<u8>>, data: Option<&[u8]>) {
    if let Some(v) = data.and_then(|d| find_attr(d, NFTA_DATA_VALUE)) {
        values.push(v.to_vec());
    }
}

fn summarize(rule: &[u8]) -> RuleSummary {
    let mut out = RuleSummary {
        handle: find_attr(rule, NFTA_RULE_HANDLE)
            .and_then(|h| h.get(0..8))
            .map(|h| u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]))
            .unwrap_or(0),
        ..RuleSummary::default()
    };
    let Some(list) = find_attr(rule, NFTA_RULE_EXPRESSIONS) else {
        return out;
    };
    for (kind, elem, _) in attrs(list) {
        if kind != NFTA_LIST_ELEM {
            continue;
        }
        let name = find_attr(elem, NFTA_EXPR_NAME)
            .map(text)
            .unwrap_or_default();
        let data = find_attr(elem, NFTA_EXPR_DATA).unwrap_or_default();
        match name.as_str() {
            "immediate" => {
                let imm = find_attr(data, NFTA_IMMEDIATE_DATA);
                let verdict = imm.and_then(|d| find_attr(d, NFTA_DATA_VERDICT));
                if let Some(chain) = verdict.and_then(|v| find_attr(v, NFTA_VERDICT_CHAIN)) {
                    out.jumps.push(text(chain));
                }
                if let Some(code) = verdict.and_then(|v| be32(find_attr(v, NFTA_VERDICT_CODE))) {
                    out.verdicts.push(code as i32);
                }
                push_value(&mut out.values, imm);
            }
            "payload" => out.payloads.push(payload_load(data)),
            "bitwise" => {
                push_value(&mut out.values, find_attr(data, NFTA_BITWISE_MASK));
                push_value(&mut out.values, find_attr(data, NFTA_BITWISE_XOR));
            }
            "cmp" => push_value(&mut out.values, find_attr(data, NFTA_CMP_DATA)),
            "match" | "target" => {
                let xt = (
                    find_attr(data, NFTA_XT_NAME).map(text).unwrap_or_default(),
                    find_attr(data, NFTA_XT_INFO).unwrap_or_default().to_vec(),
                );
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
    out
}

/// Deleting rules by handle (the firewall plugin's DEL, instead of an
/// `iptables-restore` run).
impl NfTables {
    /// Deletes `rules` (family, chain, kernel handle) of the tables named
    /// `table` in one transaction, whatever the socket's family: all of
    /// them, or none when one fails (a rule already gone: `ENOENT`).
    /// Handles are never reused within a table, so a handle read earlier
    /// names that rule or none.
    ///
    /// One transaction for every family, because what a rule deletion
    /// costs is mostly after it: the kernel frees deleted rules after an
    /// RCU grace period, and closing an nf_tables socket (or exiting)
    /// waits for that (`nft_rcv_nl_event` flushes the destroy work), about
    /// 10 ms here per transaction.
    pub fn delete_rules(
        &mut self,
        table: &str,
        rules: &[(NfFamily, &str, u64)],
    ) -> Result<(), NetError> {
        const NFT_MSG_DELRULE: u16 = 8;
        let msgs = rules
            .iter()
            .map(|(family, chain, handle)| {
                let mut req = Request::new(
                    (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE,
                    NLM_F_REQUEST,
                    &[nfproto(*family), 0, 0, 0],
                );
                req.attr(NFTA_RULE_TABLE, &cstr(table));
                req.attr(NFTA_RULE_CHAIN, &cstr(chain));
                req.attr(NFTA_RULE_HANDLE, &handle.to_be_bytes());
                req
            })
            .collect();
        self.conn.batch(
            NFNL_SUBSYS_NFTABLES,
            msgs,
            &format!("delete {} rules of {table}", rules.len()),
        )
    }
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

    /// True (after saying SKIP) when the test cannot run here: not root,
    /// or no iptables-nft-restore to make the rules it reads.
    fn skip_without_iptables_nft(test: &str) -> bool {
        if crate::testutil::skip_unless_root(test) {
            return true;
        }
        let missing = std::process::Command::new("iptables-nft-restore")
            .arg("--version")
            .output()
            .is_err();
        if missing {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIP {test}: no iptables-nft-restore (package iptables)"
            );
        }
        missing
    }

    /// Feeds `rules` to `tool --noflush -w` (iptables-nft-restore or
    /// ip6tables-nft-restore) in the current netns.
    fn restore_noflush(tool: &str, rules: &[u8]) {
        use std::io::Write;
        let mut child = std::process::Command::new(tool)
            .args(["--noflush", "-w"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(rules).unwrap();
        assert!(child.wait().unwrap().success());
    }

    #[test]
    fn reads_rules_of_iptables_nft_chains() {
        if skip_without_iptables_nft("nf_tables::reads_rules_of_iptables_nft_chains") {
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        let rules = ns
            .run(|| {
                restore_noflush("iptables-nft-restore", b"*nat\n:MARKS - [0:0]\n:MQ - [0:0]\n-A MARKS -m comment --comment x -j MARK --set-xmark 0x2000/0x2000\n-A MQ -m mark --mark 0x2000/0x2000 -j MASQUERADE\n-A PREROUTING -m addrtype --dst-type LOCAL -j MARKS\nCOMMIT\n");
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
        if skip_without_iptables_nft("nf_tables::deletes_rules_by_handle_all_or_none") {
            return;
        }
        let ns = crate::NetNs::new_anonymous().unwrap();
        ns.run(|| {
            restore_noflush("iptables-nft-restore", b"*filter\n:T - [0:0]\n-A T -s 10.134.0.2/32 -j ACCEPT\n-A T -d 10.134.0.3/32 -j DROP\n-A T -s 10.134.0.4/32 -j RETURN\nCOMMIT\n");
            restore_noflush("ip6tables-nft-restore", b"*filter\n:T - [0:0]\n-A T -s fd21:134::2/128 -j ACCEPT\nCOMMIT\n");
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
