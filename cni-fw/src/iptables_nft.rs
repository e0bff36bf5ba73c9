//! Rules as iptables-nft encodes them: adding iptables rules to the
//! nf_tables tables of `iptables-nft` over netlink, byte for byte as
//! iptables-nft 1.8.9 (Debian 12's `iptables-restore`) adds the same rule
//! text, so that `iptables-save`, `iptables -D <text>` (the Go plugins'
//! DEL) and `iptables -C` read them as their own.
//!
//! What 1.8.9 emits, per rule, in this order (seen with `nft
//! --debug=netlink` and `strace -e write=` on `iptables-restore`):
//!
//! | rule text | expressions |
//! |---|---|
//! | `-s A/32` (`/128`) | `payload` load of the network header's source address into reg 1, `cmp eq` |
//! | `-d A/32` (`/128`) | the same with the destination address |
//! | `-m conntrack --ctstate …` | x_tables compat `match` `conntrack` revision 3 with `struct xt_conntrack_mtinfo3` |
//! | `-m comment --comment C` | compat `match` `comment` revision 0 with `struct xt_comment_info` (no rule userdata in 1.8.9) |
//! | (always) | `counter` with zero bytes and packets |
//! | `-j ACCEPT` | `immediate` verdict accept into the verdict register |
//!
//! plus `NFTA_RULE_COMPAT` (protocol 0, flags 0: no `-p`), sent as
//! `NFT_MSG_NEWRULE` with `NLM_F_CREATE | NLM_F_APPEND` (`-A`: appended,
//! no position).
//!
//! The typed parts are netlink-packet-netfilter's (`Payload`, `Cmp`,
//! `Immediate`, `RuleAttribute`); the compat `match` and `counter`
//! expressions and the rule's compat attribute are not typed there and go
//! through its `Expressions::Other`/`DefaultNla` (listed in
//! [`crate::nf_gaps`]).

use crate::nf_gaps as gaps;
use crate::nf_tables::NfFamily;
use crate::nfm::Nfm;
use cni_net::IpFamily;
use cni_net::NetError;
use cni_net::NfSocket;
use netlink_packet_core::{NLM_F_APPEND, NLM_F_CREATE};
use netlink_packet_netfilter::nftables::{
    Cmp, DataAttribute, ExpressionAttribute, Expressions, Immediate, ListAttribute,
    NfTablesMessageType, Operator, Payload, Register, RuleAttribute, RuleMessage, Verdict,
    VerdictAttribute,
};
use std::net::IpAddr;

/// `NFT_PAYLOAD_NETWORK_HEADER`.
const NETWORK_HEADER: u32 = 1;
/// `NF_ACCEPT`: the crate's `Verdict` names only the nf_tables codes.
const NF_ACCEPT: u32 = 1;

/// `XT_CONNTRACK_STATE_INVALID`.
pub const CT_INVALID: u16 = 1 << 0;
/// `XT_CONNTRACK_STATE_BIT(IP_CT_NEW)`.
pub const CT_NEW: u16 = 1 << 3;
/// `XT_CONNTRACK_STATE_BIT(IP_CT_ESTABLISHED)`.
pub const CT_ESTABLISHED: u16 = 1 << 1;
/// `XT_CONNTRACK_STATE_BIT(IP_CT_RELATED)`.
pub const CT_RELATED: u16 = 1 << 2;

/// An x_tables match (`-m …`) of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XtMatch {
    /// `-m conntrack --ctstate S`, `S` a mask of [`CT_ESTABLISHED`],
    /// [`CT_RELATED`], …
    CtState(u16),
    /// `-m comment --comment C` (at most 255 bytes, no NUL).
    Comment(String),
}

/// Size of `struct xt_conntrack_mtinfo3` (with its tail padding).
const CONNTRACK_INFO_LEN: usize = 168;
/// Size of `struct xt_comment_info` (`char comment[256]`).
const COMMENT_INFO_LEN: usize = 256;

impl XtMatch {
    /// The match's x_tables name and revision, as iptables 1.8.9 uses them.
    fn name_revision(&self) -> (&'static str, u32) {
        match self {
            XtMatch::CtState(_) => ("conntrack", 3),
            XtMatch::Comment(_) => ("comment", 0),
        }
    }

    /// The match's `info` blob, as iptables 1.8.9 fills it.
    ///
    /// `--ctstate`: `struct xt_conntrack_mtinfo3` all zero but
    /// `match_flags` = `XT_CONNTRACK_STATE` (offset 146) and `state_mask`
    /// (offset 150), both native-endian u16. `--comment`: the text,
    /// NUL-padded to 256 bytes.
    pub fn info(&self) -> Result<Vec<u8>, String> {
        match self {
            XtMatch::CtState(mask) => {
                const XT_CONNTRACK_STATE: u16 = 1;
                let mut info = vec![0u8; CONNTRACK_INFO_LEN];
                info[146..148].copy_from_slice(&XT_CONNTRACK_STATE.to_ne_bytes());
                info[150..152].copy_from_slice(&mask.to_ne_bytes());
                Ok(info)
            }
            XtMatch::Comment(text) => {
                if text.len() >= COMMENT_INFO_LEN || text.contains('\0') {
                    return Err(format!(
                        "comment of {} bytes (at most {}, no NUL)",
                        text.len(),
                        COMMENT_INFO_LEN - 1
                    ));
                }
                let mut info = vec![0u8; COMMENT_INFO_LEN];
                info[..text.len()].copy_from_slice(text.as_bytes());
                Ok(info)
            }
        }
    }
}

/// One iptables rule of the forms above, for `-A chain`: `-s`/`-d` host
/// addresses (`/32`, `/128`), matches, and `-j ACCEPT` or no target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XtRule {
    /// `iptables` (V4) or `ip6tables` (V6).
    pub family: IpFamily,
    /// The chain appended to.
    pub chain: String,
    /// `-s ADDR/32` (or `/128`).
    pub source: Option<IpAddr>,
    /// `-d ADDR/32` (or `/128`).
    pub destination: Option<IpAddr>,
    /// `-m …`, in order.
    pub matches: Vec<XtMatch>,
    /// `-j ACCEPT` when true, no target when false.
    pub accept: bool,
}

impl XtRule {
    /// The rule as `iptables-save` prints it after `-A <chain> ` (what
    /// `iptables-restore` reads and `iptables -C`/`-D` take): `-s`, `-d`,
    /// the matches in order, `-j ACCEPT`. One description, two renderings:
    /// this text for the tools and the saved table, the expressions below
    /// for netlink.
    pub fn text(&self) -> String {
        let host = |ip: IpAddr| format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 });
        let mut t = Vec::new();
        if let Some(ip) = self.source {
            t.push(format!("-s {}", host(ip)));
        }
        if let Some(ip) = self.destination {
            t.push(format!("-d {}", host(ip)));
        }
        for m in &self.matches {
            t.push(match m {
                XtMatch::CtState(mask) => {
                    // libxt_conntrack's order of the states it prints.
                    let names = [
                        (CT_INVALID, "INVALID"),
                        (CT_NEW, "NEW"),
                        (CT_RELATED, "RELATED"),
                        (CT_ESTABLISHED, "ESTABLISHED"),
                    ];
                    let states: Vec<&str> = names
                        .iter()
                        .filter(|(bit, _)| mask & bit != 0)
                        .map(|(_, name)| *name)
                        .collect();
                    format!("-m conntrack --ctstate {}", states.join(","))
                }
                XtMatch::Comment(c) => format!("-m comment --comment {}", crate::hash::go_quote(c)),
            });
        }
        if self.accept {
            t.push("-j ACCEPT".to_string());
        }
        t.join(" ")
    }
}

impl XtRule {
    /// Whether `read` (a rule of this rule's chain read back over netlink,
    /// `nf_tables::NfTables::chain_rules`) is this rule as iptables-nft
    /// stores it: the expressions [`append_rules`] would send, read as a
    /// dump is read, the same but for a `counter` (which iptables-nft
    /// versions add or not). How DEL finds a rule's kernel handle without
    /// a third description of the rule.
    pub fn is_stored_as(&self, read: &crate::nf_tables::RuleSummary) -> bool {
        self.stored_form().is_some_and(|form| form.is(read))
    }

    /// This rule as a dump reads it back, made once for comparing with
    /// many rules read ([`StoredForm::is`]): making it (encoding and
    /// decoding the rule) costs far more than a comparison.
    pub fn stored_form(&self) -> Option<StoredForm> {
        use crate::nfm::NfBody;
        let msg = new_rule("", self).ok()?;
        let mut body = vec![0u8; msg.body.body_len()];
        msg.body.emit_body(&mut body);
        let (_, mut want) = crate::nf_tables::read_rule(&body);
        want.exprs.retain(|e| e != "counter");
        Some(StoredForm(want))
    }
}

/// An [`XtRule`] as iptables-nft stores it, counters left out
/// ([`XtRule::stored_form`]).
#[derive(Debug, Clone)]
pub struct StoredForm(crate::nf_tables::RuleSummary);

impl StoredForm {
    /// Whether `read` is this rule, but for a `counter` (which iptables-nft
    /// versions add or not).
    pub fn is(&self, read: &crate::nf_tables::RuleSummary) -> bool {
        let want = &self.0;
        want.exprs
            .iter()
            .eq(read.exprs.iter().filter(|e| *e != "counter"))
            && want.payloads == read.payloads
            && want.values == read.values
            && want.xt_matches == read.xt_matches
            && want.xt_targets == read.xt_targets
            && want.jumps == read.jumps
            && want.verdicts == read.verdicts
    }
}

/// Where the network header holds the source and destination address, and
/// the address bytes.
fn address_load(family: IpFamily, ip: IpAddr, source: bool) -> Option<(u32, Vec<u8>)> {
    match (family, ip) {
        (IpFamily::V4, IpAddr::V4(a)) => Some((if source { 12 } else { 16 }, a.octets().to_vec())),
        (IpFamily::V6, IpAddr::V6(a)) => Some((if source { 8 } else { 24 }, a.octets().to_vec())),
        _ => None,
    }
}

fn element(ex: Expressions) -> ListAttribute<ExpressionAttribute> {
    ex.into()
}

/// The expressions iptables-nft 1.8.9 makes of `rule` (see the module
/// documentation).
fn expressions(rule: &XtRule) -> Result<Vec<ListAttribute<ExpressionAttribute>>, String> {
    let mut out = Vec::new();
    let addresses = [(rule.source, true), (rule.destination, false)];
    for (ip, source) in addresses {
        let Some(ip) = ip else { continue };
        let (offset, bytes) = address_load(rule.family, ip, source)
            .ok_or_else(|| format!("address {ip} in a {:?} rule", rule.family))?;
        out.push(element(Expressions::Payload(vec![
            Payload::DestinationRegister(Register::Reg1),
            Payload::Base(NETWORK_HEADER),
            Payload::Offset(offset),
            Payload::Len(bytes.len() as u32),
        ])));
        out.push(element(Expressions::Cmp(vec![
            Cmp::SourceRegister(Register::Reg1),
            Cmp::Op(Operator::Equal),
            Cmp::Data(DataAttribute::Value(bytes)),
        ])));
    }
    for m in &rule.matches {
        let (name, revision) = m.name_revision();
        out.push(element(gaps::xt_match(name, revision, m.info()?)));
    }
    out.push(element(gaps::zero_counter()));
    if rule.accept {
        out.push(element(Expressions::Immediate(vec![
            Immediate::DestinationRegister(Register::Verdict),
            Immediate::Data(DataAttribute::Verdict(vec![VerdictAttribute::Code(
                Verdict::Other(NF_ACCEPT),
            )])),
        ])));
    }
    Ok(out)
}

/// The `NFT_MSG_NEWRULE` request appending `rule` to `table` (sent with
/// `NLM_F_CREATE | NLM_F_APPEND`).
fn new_rule(table: &str, rule: &XtRule) -> Result<Nfm<RuleMessage>, String> {
    let body = RuleMessage {
        attributes: vec![
            RuleAttribute::Table(table.to_string()),
            RuleAttribute::Chain(rule.chain.clone()),
            RuleAttribute::Expressions(expressions(rule)?),
            RuleAttribute::Compat(gaps::rule_compat_no_protocol()),
        ],
    };
    let family = NfFamily::from(rule.family).into();
    Ok(Nfm::nftables(NfTablesMessageType::NewRule, family, body))
}

/// Appends `rules` to the chains of the tables named `table` (of each
/// rule's family), in one transaction for every family: all of them, or
/// none (a missing chain or table: `ENOENT`).
pub fn append_rules(table: &str, rules: &[XtRule]) -> Result<(), NetError> {
    let mut socket = NfSocket::open("nf_tables")?;
    append_with(&mut socket, table, rules)
}

fn append_with(socket: &mut NfSocket, table: &str, rules: &[XtRule]) -> Result<(), NetError> {
    let op = format!("append {} rules to {table}", rules.len());
    let msgs = rules
        .iter()
        .map(|r| new_rule(table, r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NetError::other(&op, e))?;
    crate::nfm::nftables_batch(socket, &msgs, NLM_F_CREATE | NLM_F_APPEND, &op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The firewall plugin's three rules of one IPv4 address.
    fn firewall_rules(addr: &str, comment: &str) -> [XtRule; 3] {
        let a = ip(addr);
        let family = if a.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        };
        [
            XtRule {
                family,
                chain: "CNI-FORWARD".into(),
                source: None,
                destination: Some(a),
                matches: vec![XtMatch::CtState(CT_RELATED | CT_ESTABLISHED)],
                accept: true,
            },
            XtRule {
                family,
                chain: "CNI-FORWARD".into(),
                source: Some(a),
                destination: None,
                matches: vec![],
                accept: true,
            },
            XtRule {
                family,
                chain: "CNI-FW-ATTACHMENTS".into(),
                source: Some(a),
                destination: None,
                matches: vec![XtMatch::Comment(comment.into())],
                accept: false,
            },
        ]
    }

    /// What `iptables-restore --noflush` (iptables v1.8.9 (nf_tables),
    /// Debian 12) sent for
    ///
    /// ```text
    /// -A CNI-FORWARD -d 10.138.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    /// -A CNI-FORWARD -s 10.138.0.2/32 -j ACCEPT
    /// -A CNI-FW-ATTACHMENTS -s 10.138.0.2/32 -m comment --comment "abc name: n id: c if: eth0"
    /// ```
    ///
    /// one `NFT_MSG_NEWRULE` per line: everything after the netlink header
    /// (nfgenmsg and attributes), captured with `strace -e write=3`.
    const IPTABLES_NFT_1_8_9_V4: &str = include_str!("testdata/iptables-nft-1.8.9-newrule-v4.hex");

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn encodes_as_iptables_nft_1_8_9() {
        let theirs: Vec<Vec<u8>> = IPTABLES_NFT_1_8_9_V4.lines().map(hex).collect();
        assert_eq!(theirs.len(), 3);
        let mut socket = NfSocket::capture("nf_tables");
        let ours = firewall_rules("10.138.0.2", "abc name: n id: c if: eth0");
        append_with(&mut socket, "filter", &ours).unwrap();
        let sent = socket.captured();
        let [batch] = sent.as_slice() else {
            panic!("one datagram: {sent:?}")
        };
        // BEGIN, the three rules, END; each netlink header, then the body.
        let mut at = 0;
        let mut msgs = Vec::new();
        while at < batch.len() {
            let len = u32::from_ne_bytes(batch[at..at + 4].try_into().unwrap()) as usize;
            msgs.push(&batch[at..at + len]);
            at += (len + 3) & !3;
        }
        assert_eq!(msgs.len(), 5);
        for (i, (msg, want)) in msgs[1..4].iter().zip(&theirs).enumerate() {
            // NEWRULE with NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND (the
            // last one also asks for the ACK), as theirs.
            let ack = if i == 2 { 0x04 } else { 0 };
            assert_eq!(
                &msg[4..8],
                &[0x06, 0x0a, 0x01 | ack, 0x0c],
                "rule {i}: type and flags"
            );
            assert_eq!(&msg[16..], &want[..], "rule {i}: body");
        }
    }

    /// The text of the firewall's three rules, as iptables-save prints
    /// what iptables-nft 1.8.9 stored for them (the captured rules above).
    #[test]
    fn text_is_what_iptables_save_prints() {
        let [tracked, plain, record] = firewall_rules("10.138.0.2", "abc name: \"n\" id: c");
        assert_eq!(
            tracked.text(),
            "-d 10.138.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        );
        assert_eq!(plain.text(), "-s 10.138.0.2/32 -j ACCEPT");
        assert_eq!(
            record.text(),
            r#"-s 10.138.0.2/32 -m comment --comment "abc name: \"n\" id: c""#
        );
        let [_, v6, _] = firewall_rules("fd00:138::2", "x");
        assert_eq!(v6.text(), "-s fd00:138::2/128 -j ACCEPT");
        let mut all = tracked.clone();
        all.matches = vec![XtMatch::CtState(
            CT_INVALID | CT_NEW | CT_RELATED | CT_ESTABLISHED,
        )];
        assert!(
            all.text()
                .contains("--ctstate INVALID,NEW,RELATED,ESTABLISHED -j")
        );
    }

    #[test]
    fn refuses_what_iptables_refuses() {
        let new_rule = |t, r: &XtRule| new_rule(t, r).map(|_| ());
        let mut r = firewall_rules("10.138.0.2", "x")[1].clone();
        r.family = IpFamily::V6;
        assert!(new_rule("filter", &r).is_err(), "IPv4 address in ip6tables");
        let long = firewall_rules("10.138.0.2", &"c".repeat(256))[2].clone();
        assert!(new_rule("filter", &long).is_err());
        let max = firewall_rules("10.138.0.2", &"c".repeat(255))[2].clone();
        assert!(new_rule("filter", &max).is_ok());
        let nul = firewall_rules("10.138.0.2", "a\0b")[2].clone();
        assert!(new_rule("filter", &nul).is_err());
    }

    /// Every attribute of every rule in `family filter`, in chain order
    /// (`nft --debug=netlink` prints the expressions; `iptables-save` the
    /// match blobs decoded): handles and positions left out.
    fn listing(v6: bool) -> (String, String) {
        let run = |cmd: &str, args: &[&str]| {
            let out = std::process::Command::new(cmd).args(args).output().unwrap();
            assert!(out.status.success(), "{cmd} {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let family = if v6 { "ip6" } else { "ip" };
        let nft = run(
            "nft",
            &["--debug=netlink", "list", "table", family, "filter"],
        );
        // "ip filter CNI-FORWARD <handle> [<position>]": the chain only.
        let nft = nft
            .lines()
            .map(|l| {
                if l.starts_with(family) {
                    l.split(' ').take(3).collect::<Vec<_>>().join(" ")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let save = run(
            if v6 {
                "ip6tables-save"
            } else {
                "iptables-save"
            },
            &[],
        );
        let save = save
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        (nft, save)
    }

    /// Every rule of `filter` in both families as the kernel dumps it,
    /// attribute by attribute, without the handle and position
    /// (`NFTA_RULE_HANDLE`, `NFTA_RULE_POSITION`), which differ by history.
    fn raw_rules() -> Vec<Vec<u8>> {
        use netlink_packet_core::{NLM_F_DUMP, NlasIterator};
        let mut socket = NfSocket::open("nf_tables").unwrap();
        let mut out = Vec::new();
        for family in [NfFamily::Ip, NfFamily::Ip6] {
            let dump = RuleMessage {
                attributes: vec![RuleAttribute::Table("filter".into())],
            };
            let req = Nfm::nftables(NfTablesMessageType::GetRule, family.into(), dump);
            socket
                .request(&req, NLM_F_DUMP, "dump", |head, payload| {
                    if head.message_type & 0xff == 6 {
                        // nfgenmsg: family and version; res_id is the generation.
                        let mut rule = payload[..2].to_vec();
                        for nla in NlasIterator::new(&payload[4..]) {
                            let nla = nla.unwrap();
                            // Not NFTA_RULE_HANDLE, NFTA_RULE_POSITION.
                            if nla.kind() != 3 && nla.kind() != 6 {
                                let len = usize::from(nla.length());
                                rule.extend_from_slice(&nla.into_inner()[..len]);
                            }
                        }
                        out.push(rule);
                    }
                    Ok(())
                })
                .unwrap();
        }
        out
    }

    fn iptables_nft_restore(v6: bool, text: &str) {
        let tool = if v6 {
            "ip6tables-nft-restore"
        } else {
            "iptables-nft-restore"
        };
        crate::nf_tables::tests::restore_noflush(tool, text.as_bytes());
    }

    /// True (the test is skipped, saying why) unless root with
    /// iptables-nft-restore.
    fn skip_without_iptables_nft(test: &str) -> bool {
        if rcni_tests::skip_unless_root(test) {
            return true;
        }
        let missing = std::process::Command::new("iptables-nft-restore")
            .arg("--version")
            .output()
            .is_err();
        if missing {
            eprintln!("SKIP {test}: no iptables-nft-restore");
        }
        missing
    }

    /// The kernel holds the same rules whichever way they were added.
    #[test]
    fn the_kernel_stores_what_iptables_nft_stores() {
        if skip_without_iptables_nft("iptables_nft::the_kernel_stores_what_iptables_nft_stores") {
            return;
        }
        let chains = "*filter\n:CNI-FORWARD - [0:0]\n:CNI-FW-ATTACHMENTS - [0:0]\nCOMMIT\n";
        let comment = "0123456789abcdef-0123456789abcdef name: n id: c if: eth0";
        let by_tool = cni_net::NetNs::new_anonymous().unwrap();
        let by_us = cni_net::NetNs::new_anonymous().unwrap();
        let mut texts = Vec::new();
        for (ns, ours) in [(&by_tool, false), (&by_us, true)] {
            let got = ns
                .run(|| {
                    for v6 in [false, true] {
                        iptables_nft_restore(v6, chains);
                    }
                    let rules: Vec<XtRule> = firewall_rules("10.138.0.2", comment)
                        .into_iter()
                        .chain(firewall_rules("fd00:138::2", comment))
                        .collect();
                    if ours {
                        append_rules("filter", &rules).unwrap();
                    } else {
                        for (v6, a) in [(false, "10.138.0.2/32"), (true, "fd00:138::2/128")] {
                            iptables_nft_restore(v6, &format!(
                                "*filter\n-A CNI-FORWARD -d {a} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A CNI-FORWARD -s {a} -j ACCEPT\n-A CNI-FW-ATTACHMENTS -s {a} -m comment --comment \"{comment}\"\nCOMMIT\n"
                            ));
                        }
                    }
                    (listing(false), listing(true), raw_rules())
                })
                .unwrap();
            texts.push(got);
        }
        assert_eq!(texts[0], texts[1]);
        assert_eq!(texts[1].2.len(), 6, "rules added");
        assert!(texts[1].0.1.contains(&format!(
            "-A CNI-FW-ATTACHMENTS -s 10.138.0.2/32 -m comment --comment \"{comment}\""
        )));
        assert!(texts[1].1.0.contains("[ match name conntrack rev 3 ]"));
    }

    /// The rules iptables-nft-restore wrote are recognised as the rules
    /// whose text it was given, each as itself only.
    #[test]
    fn fp_rules_written_by_iptables_nft_are_recognised() {
        if skip_without_iptables_nft(
            "iptables_nft::fp_rules_written_by_iptables_nft_are_recognised",
        ) {
            return;
        }
        let ns = cni_net::NetNs::new_anonymous().unwrap();
        let comment = "0123456789abcdef-0123456789abcdef name: n id: c if: eth0";
        ns.run(|| {
            for (v6, addr) in [(false, "10.173.0.2"), (true, "fd00:173::2")] {
                let rules = firewall_rules(addr, comment);
                let mut text =
                    "*filter\n:CNI-FORWARD - [0:0]\n:CNI-FW-ATTACHMENTS - [0:0]\n".to_string();
                for r in &rules {
                    text += &format!("-A {} {}\n", r.chain, r.text());
                }
                iptables_nft_restore(v6, &(text + "COMMIT\n"));
                let family = rules[0].family;
                let mut t = crate::nf_tables::NfTables::open(family).unwrap();
                let mut read = t.chain_rules("filter", "CNI-FORWARD").unwrap();
                read.extend(t.chain_rules("filter", "CNI-FW-ATTACHMENTS").unwrap());
                assert_eq!(read.len(), 3);
                for (i, rule) in rules.iter().enumerate() {
                    for (j, stored) in read.iter().enumerate() {
                        assert_eq!(
                            rule.is_stored_as(stored),
                            i == j,
                            "{addr}: rule {i}, read {j}"
                        );
                    }
                }
                let other = firewall_rules(if v6 { "fd00:173::3" } else { "10.173.0.3" }, comment);
                assert!(!other[1].is_stored_as(&read[1]));
            }
        })
        .unwrap();
    }

    #[test]
    fn a_missing_chain_adds_nothing() {
        if rcni_tests::skip_unless_root("iptables_nft::a_missing_chain_adds_nothing") {
            return;
        }
        let ns = cni_net::NetNs::new_anonymous().unwrap();
        let e = ns
            .run(|| append_rules("filter", &firewall_rules("10.138.0.2", "x")))
            .unwrap()
            .unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }
}
