//! Rules as iptables-nft encodes them: adding iptables rules to the
//! nf_tables tables of `iptables-nft` over netlink, byte for byte as
//! iptables-nft 1.8.9 (Debian 12's `iptables-restore`) adds the same rule
//! text, so that `iptables-save`, `iptables -D <text>` (the Go plugins'
//! DEL) and `iptables -C` read them as their own.
//!
//! What 1.8.9 emits, per rule, in this order (seen with `nft
//! --debug=netlink` and `strace -e write=` on `iptables-restore`; the
//! golden captures are this module's and `portmap`'s `ipt_fast_add`
//! tests):
//!
//! | rule text | expressions |
//! |---|---|
//! | `-p tcp` (`udp`, `sctp`) | `meta` load of `l4proto` into reg 1, `cmp eq` of the protocol's byte |
//! | `-s A/32` (`/128`) | `payload` load of the network header's source address into reg 1, `cmp eq` |
//! | `-s N/P`, `P` a multiple of 8 | the same, loading and comparing only the prefix's `P/8` bytes |
//! | `-s N/P`, other `P` | the whole address loaded, `bitwise` with the prefix's mask (xor 0), `cmp eq` |
//! | `-d …` | the same with the destination address |
//! | `! -d …` | the same, `cmp neq` |
//! | `-m tcp --dport N` (`udp`) | `payload` load of the transport header's 2 bytes at offset 2, `cmp eq` |
//! | `-m sctp --dport N` | x_tables compat `match` `sctp` revision 0 with `struct xt_sctp_info` |
//! | `-m multiport --dports …` | compat `match` `multiport` revision 1 with `struct xt_multiport_v1` |
//! | `-m conntrack --ctstate …` | compat `match` `conntrack` revision 3 with `struct xt_conntrack_mtinfo3` |
//! | `-m comment --comment C` | compat `match` `comment` revision 0 with `struct xt_comment_info` (no rule userdata in 1.8.9) |
//! | (always) | `counter` with zero bytes and packets |
//! | `-j ACCEPT` | `immediate` verdict accept into the verdict register |
//! | `-j CHAIN` | `immediate` verdict jump to `CHAIN` |
//! | `-j DNAT --to-destination A:P` | compat `target` `DNAT` revision 2 with `struct nf_nat_range2` |
//! | `-j MASQUERADE` | compat `target` `MASQUERADE` revision 0 with `struct nf_nat_ipv4_multi_range_compat` (`nf_nat_range` for IPv6) |
//!
//! plus `NFTA_RULE_COMPAT` (the `-p` protocol number or 0, flags 0), sent
//! as `NFT_MSG_NEWRULE` with `NLM_F_CREATE | NLM_F_APPEND` (`-A`: appended,
//! no position). `-N CHAIN` is `NFT_MSG_NEWCHAIN` with the table and name
//! only, sent with `NLM_F_EXCL`; [`new_chains_with_rules`] sends chains
//! of both families and their rules in one batch.
//!
//! The typed parts are netlink-packet-netfilter's (`Meta`, `Payload`,
//! `Bitwise`, `Cmp`, `Immediate`, `ChainAttribute`); the
//! compat `match` and `target` and `counter` expressions and the rule's
//! compat attribute are not typed there (cni-fw's `nf_gaps` module). A
//! rule's message is written in one pass into one buffer by
//! `cni_net::Attrs` (the nesting, the table and chain names), each typed
//! expression attribute emitted into it by the crate: the crate's own
//! `RuleMessage` measures every nested attribute again at each level
//! above it (see `nf_gaps`).

use crate::nf_gaps as gaps;
use crate::nf_tables::{NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_TABLE, NfFamily};
use crate::nfm::{Encoded, Nfm};
use cni_net::Attrs;
use cni_net::IpFamily;
use cni_net::NetError;
use cni_net::NfSocket;
use ipnetwork::IpNetwork;
use netlink_packet_core::{NLA_F_NESTED, NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_netfilter::nftables::{
    Bitwise, Cmp, DataAttribute, Immediate, Meta, MetaKey, NfTablesMessageType, Operator, Payload,
    Register, Verdict, VerdictAttribute,
};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// `NFT_PAYLOAD_NETWORK_HEADER`.
const NETWORK_HEADER: u32 = 1;
/// `NFT_PAYLOAD_TRANSPORT_HEADER`.
const TRANSPORT_HEADER: u32 = 2;
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
    /// `-m <protocol> --dport N` of the rule's `-p` (tcp and udp: a native
    /// payload comparison in 1.8.9; sctp: the x_tables match).
    Dport(u16),
    /// `-m multiport --dports A,B,…` (1 to 15 ports).
    Multiport(Vec<u16>),
}

/// Size of `struct xt_conntrack_mtinfo3` (with its tail padding).
const CONNTRACK_INFO_LEN: usize = 168;
/// Size of `struct xt_comment_info` (`char comment[256]`).
const COMMENT_INFO_LEN: usize = 256;
/// Size of `struct xt_sctp_info` (with its tail padding).
const SCTP_INFO_LEN: usize = 296;
/// Size of `struct xt_multiport_v1` (15 ports).
const MULTIPORT_INFO_LEN: usize = 48;
/// Size of `struct nf_nat_range2` (with its tail padding).
const NAT_RANGE2_LEN: usize = 48;

impl XtMatch {
    /// The match's x_tables name, revision and `info` blob, as iptables
    /// 1.8.9 fills it (all native-endian; every other byte zero):
    ///
    /// - `--ctstate`: `struct xt_conntrack_mtinfo3`'s `match_flags` =
    ///   `XT_CONNTRACK_STATE` (offset 146) and `state_mask` (150), u16;
    /// - `--comment`: the text, NUL-padded to 256 bytes;
    /// - sctp `--dport`: `struct xt_sctp_info`'s `dpts` (offset 0, u16
    ///   twice), the four `flag_info` chunk types 255 (offsets 268 + 3i)
    ///   and `flags` = `XT_SCTP_DEST_PORTS` (284, u32);
    /// - `--dports`: `struct xt_multiport_v1`'s `flags` =
    ///   `XT_MULTIPORT_DESTINATION`, `count`, then the ports (u16).
    fn xt(&self) -> Result<(&'static str, u32, Vec<u8>), String> {
        let put16 = |info: &mut Vec<u8>, at: usize, v: u16| {
            info[at..at + 2].copy_from_slice(&v.to_ne_bytes())
        };
        match self {
            XtMatch::CtState(mask) => {
                let mut info = vec![0u8; CONNTRACK_INFO_LEN];
                put16(&mut info, 146, 1);
                put16(&mut info, 150, *mask);
                Ok(("conntrack", 3, info))
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
                Ok(("comment", 0, info))
            }
            XtMatch::Dport(port) => {
                let mut info = vec![0u8; SCTP_INFO_LEN];
                put16(&mut info, 0, *port);
                put16(&mut info, 2, *port);
                for i in 0..4 {
                    info[268 + 3 * i] = 0xff;
                }
                info[284..288].copy_from_slice(&2u32.to_ne_bytes());
                Ok(("sctp", 0, info))
            }
            XtMatch::Multiport(ports) => {
                if ports.is_empty() || ports.len() > 15 {
                    return Err(format!("{} ports in one multiport match", ports.len()));
                }
                let mut info = vec![0u8; MULTIPORT_INFO_LEN];
                info[0] = 1;
                info[1] = ports.len() as u8;
                for (i, p) in ports.iter().enumerate() {
                    put16(&mut info, 2 + 2 * i, *p);
                }
                Ok(("multiport", 1, info))
            }
        }
    }
}

/// A rule's `-p`: the protocols whose `--dport` iptables-nft 1.8.9
/// encodes as [`XtMatch::Dport`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XtProto {
    /// `-p tcp`.
    Tcp,
    /// `-p udp`.
    Udp,
    /// `-p sctp`.
    Sctp,
}

impl XtProto {
    fn name_number(self) -> (&'static str, u8) {
        match self {
            XtProto::Tcp => ("tcp", 6),
            XtProto::Udp => ("udp", 17),
            XtProto::Sctp => ("sctp", 132),
        }
    }
}

/// A rule's `-j`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XtTarget {
    /// `-j ACCEPT`.
    Accept,
    /// `-j CHAIN`: a jump to a user chain.
    Jump(String),
    /// `-j DNAT --to-destination ADDR:PORT` (`[ADDR]:PORT` for IPv6).
    Dnat(std::net::SocketAddr),
    /// `-j MASQUERADE`, without options.
    Masquerade,
}

/// One iptables rule of the forms above, for `-A chain`: `-s`/`-d`
/// addresses or networks, `-p`, matches, and a target or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XtRule {
    /// `iptables` (V4) or `ip6tables` (V6).
    pub family: IpFamily,
    /// The chain appended to.
    pub chain: String,
    /// `-s NET` (a host: `/32`, `/128`; not `/0`).
    pub source: Option<IpNetwork>,
    /// `-d NET`.
    pub destination: Option<IpNetwork>,
    /// `! -d NET`: anything but `destination`.
    pub not_destination: bool,
    /// `-p`.
    pub protocol: Option<XtProto>,
    /// `-m …`, in order.
    pub matches: Vec<XtMatch>,
    /// `-j …`, or no target.
    pub target: Option<XtTarget>,
}

impl XtRule {
    /// The rule as `iptables-save` prints it after `-A <chain> ` (what
    /// `iptables-restore` reads and `iptables -C`/`-D` take): `-s`, `-d`,
    /// `-p`, the matches in order, `-j`. One description, two renderings:
    /// this text for the tools and the saved table, the expressions below
    /// for netlink.
    pub fn text(&self) -> String {
        let net = |n: IpNetwork| format!("{}/{}", n.network(), n.prefix());
        let mut t = Vec::new();
        if let Some(n) = self.source {
            t.push(format!("-s {}", net(n)));
        }
        if let Some(n) = self.destination {
            let bang = if self.not_destination { "! " } else { "" };
            t.push(format!("{bang}-d {}", net(n)));
        }
        let proto = self.protocol.map(|p| p.name_number().0);
        if let Some(p) = proto {
            t.push(format!("-p {p}"));
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
                XtMatch::Dport(port) => format!("-m {} --dport {port}", proto.unwrap_or("?")),
                XtMatch::Multiport(ports) => {
                    let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                    format!("-m multiport --dports {}", list.join(","))
                }
            });
        }
        match &self.target {
            Some(XtTarget::Accept) => t.push("-j ACCEPT".to_string()),
            Some(XtTarget::Jump(chain)) => t.push(format!("-j {chain}")),
            Some(XtTarget::Dnat(to)) => t.push(format!("-j DNAT --to-destination {to}")),
            Some(XtTarget::Masquerade) => t.push("-j MASQUERADE".to_string()),
            None => {}
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
        let msg = new_rule("", self, &mut Written::default()).ok()?;
        let (_, mut want) = crate::nf_tables::read_rule(&msg.body.0);
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
            && want.cmp_ops == read.cmp_ops
            && want.xt_matches == read.xt_matches
            && want.xt_targets == read.xt_targets
            && want.jumps == read.jumps
            && want.verdicts == read.verdicts
    }
}

/// Where the network header holds the source and destination address.
fn address_offset(net: IpNetwork, source: bool) -> u32 {
    match (net, source) {
        (IpNetwork::V4(_), true) => 12,
        (IpNetwork::V4(_), false) => 16,
        (IpNetwork::V6(_), true) => 8,
        (IpNetwork::V6(_), false) => 24,
    }
}

/// The expressions already written in one batch, by a key of what they
/// are made of: a batch repeats most of them (each of portmap's rules has
/// the same `meta`, protocol `cmp`, `counter` and verdict, most the same
/// address `payload` and `cmp`), and copying their bytes costs a fraction
/// of writing them (portmap's whole ADD of 50 mappings, 154 rules: 3.89 M
/// instructions, 2.92 M with this; of 1 mapping 425 K, 442 K with this).
#[derive(Default)]
struct Written {
    seen: BTreeMap<Vec<u8>, Vec<u8>>,
    key: Vec<u8>,
}

impl Written {
    /// Writes into `out` the expression that `key` names (its parts
    /// concatenated: a tag byte naming the kind, then fields of fixed size
    /// or NUL-terminated, at most the last of variable size), with `write`
    /// the first time, a copy of those bytes after.
    fn expression(&mut self, out: &mut Attrs, key: &[&[u8]], write: impl FnOnce(&mut Attrs)) {
        self.key.clear();
        for part in key {
            self.key.extend_from_slice(part);
        }
        if let Some(bytes) = self.seen.get(&self.key[..]) {
            out.raw(bytes);
            return;
        }
        let start = out.position();
        write(out);
        let bytes = out.written_since(start).to_vec();
        self.seen.insert(self.key.clone(), bytes);
    }

    /// `[ payload load LEN @ BASE + OFFSET => reg 1 ]`.
    fn load(&mut self, out: &mut Attrs, base: u32, offset: u32, len: usize) {
        let fields = [base, offset, len as u32].map(u32::to_ne_bytes);
        self.expression(out, &[b"l", &fields.concat()], |out| {
            gaps::typed_expression(
                out,
                "payload",
                &[
                    Payload::DestinationRegister(Register::Reg1),
                    Payload::Base(base),
                    Payload::Offset(offset),
                    Payload::Len(len as u32),
                ],
            )
        });
    }

    /// `[ cmp OP reg 1 VALUE ]`, `OP` `eq` or (`not`) `neq`.
    fn compare(&mut self, out: &mut Attrs, not: bool, value: &[u8]) {
        self.expression(out, &[b"c", &[u8::from(not)], value], |out| {
            let op = if not {
                Operator::NotEqual
            } else {
                Operator::Equal
            };
            gaps::typed_expression(
                out,
                "cmp",
                &[
                    Cmp::SourceRegister(Register::Reg1),
                    Cmp::Op(op),
                    Cmp::Data(DataAttribute::Value(value.to_vec())),
                ],
            )
        });
    }

    /// `[ immediate reg 0 VERDICT ]`: accept, or a jump to `chain`.
    fn verdict(&mut self, out: &mut Attrs, jump: Option<&str>) {
        let key: [&[u8]; 2] = match jump {
            None => [b"a", b""],
            Some(chain) => [b"j", chain.as_bytes()],
        };
        self.expression(out, &key, |out| {
            let v = match jump {
                None => vec![VerdictAttribute::Code(Verdict::Other(NF_ACCEPT))],
                Some(chain) => vec![
                    VerdictAttribute::Code(Verdict::Jump),
                    VerdictAttribute::Chain(chain.to_string()),
                ],
            };
            gaps::typed_expression(
                out,
                "immediate",
                &[
                    Immediate::DestinationRegister(Register::Verdict),
                    Immediate::Data(DataAttribute::Verdict(v)),
                ],
            )
        });
    }

    /// An x_tables compat `match` or `target` (`kind`) (see
    /// [`gaps::xt_expression`]).
    fn xt(&mut self, out: &mut Attrs, kind: &str, name: &str, revision: u32, info: &[u8]) {
        let key = [
            b"x",
            kind.as_bytes(),
            b"\0",
            name.as_bytes(),
            b"\0",
            &revision.to_ne_bytes(),
            info,
        ];
        self.expression(out, &key, |out| {
            gaps::xt_expression(out, kind, name, revision, info)
        });
    }
}

/// `struct nf_nat_ipv4_multi_range_compat` (`rangesize`, one
/// `nf_nat_ipv4_range`: 20 bytes) padded to 8 (`XT_ALIGN`), as iptables
/// 1.8.9's MASQUERADE sends it: `rangesize` 1 (u32, native), the rest
/// zero. Its IPv6 MASQUERADE sends an all-zero `struct nf_nat_range` (40
/// bytes).
fn masquerade_info(family: IpFamily) -> Vec<u8> {
    match family {
        IpFamily::V4 => {
            let mut info = vec![0u8; 24];
            info[..4].copy_from_slice(&1u32.to_ne_bytes());
            info
        }
        IpFamily::V6 => vec![0u8; 40],
    }
}

/// `struct nf_nat_range2` of `--to-destination ADDR:PORT`: `flags` =
/// `NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED` (u32, native),
/// `min_addr` = `max_addr` (16 bytes each), `min_proto` = `max_proto`
/// (the port, big endian).
fn nat_range2(to: std::net::SocketAddr) -> Vec<u8> {
    let mut info = vec![0u8; NAT_RANGE2_LEN];
    info[..4].copy_from_slice(&3u32.to_ne_bytes());
    let ip = match to.ip() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    info[4..4 + ip.len()].copy_from_slice(&ip);
    info[20..20 + ip.len()].copy_from_slice(&ip);
    let port = to.port().to_be_bytes();
    info[36..38].copy_from_slice(&port);
    info[38..40].copy_from_slice(&port);
    info
}

/// Writes into `out` the expressions iptables-nft 1.8.9 makes of `rule`
/// (see the module documentation): the value of the rule's
/// `NFTA_RULE_EXPRESSIONS`. `w`: the expressions written before in the
/// batch.
fn expressions(out: &mut Attrs, w: &mut Written, rule: &XtRule) -> Result<(), String> {
    if let Some(p) = rule.protocol {
        w.expression(out, &[b"m"], |out| {
            gaps::typed_expression(
                out,
                "meta",
                &[
                    Meta::Key(MetaKey::L4Proto),
                    Meta::DestinationRegister(Register::Reg1),
                ],
            )
        });
        w.compare(out, false, &[p.name_number().1]);
    }
    let addresses = [
        (rule.source, true, false),
        (rule.destination, false, rule.not_destination),
    ];
    for (net, source, not) in addresses {
        let Some(net) = net else { continue };
        let bytes = match net.network() {
            IpAddr::V4(a) if rule.family == IpFamily::V4 => a.octets().to_vec(),
            IpAddr::V6(a) if rule.family == IpFamily::V6 => a.octets().to_vec(),
            ip => return Err(format!("address {ip} in a {:?} rule", rule.family)),
        };
        let offset = address_offset(net, source);
        let prefix = usize::from(net.prefix());
        if prefix == 0 {
            return Err(format!("{net}: iptables leaves a /0 out"));
        }
        if prefix % 8 == 0 {
            // A whole number of bytes: only those are loaded.
            w.load(out, NETWORK_HEADER, offset, prefix / 8);
            w.compare(out, not, &bytes[..prefix / 8]);
        } else {
            // The prefix's bits of each byte: 0xff, then 0xf0 (say), then 0.
            let mask: Vec<u8> = (0..bytes.len())
                .map(|i| (0xff00u16 >> prefix.saturating_sub(8 * i).min(8)) as u8)
                .collect();
            w.load(out, NETWORK_HEADER, offset, bytes.len());
            w.expression(out, &[b"b", &mask], |out| {
                gaps::typed_expression(
                    out,
                    "bitwise",
                    &[
                        Bitwise::SourceRegister(Register::Reg1),
                        Bitwise::DestinationRegister(Register::Reg1),
                        Bitwise::Length(bytes.len() as u32),
                        Bitwise::Mask(DataAttribute::Value(mask.clone())),
                        Bitwise::Xor(DataAttribute::Value(vec![0; bytes.len()])),
                    ],
                )
            });
            w.compare(out, not, &bytes);
        }
    }
    for m in &rule.matches {
        match (m, rule.protocol) {
            (XtMatch::Dport(port), Some(XtProto::Tcp | XtProto::Udp)) => {
                w.load(out, TRANSPORT_HEADER, 2, 2);
                w.compare(out, false, &port.to_be_bytes());
            }
            (XtMatch::Dport(_), None) => return Err("--dport without -p".to_string()),
            _ => {
                let (name, revision, info) = m.xt()?;
                w.xt(out, "match", name, revision, &info);
            }
        }
    }
    w.expression(out, &[b"0"], gaps::zero_counter);
    match &rule.target {
        Some(XtTarget::Accept) => w.verdict(out, None),
        Some(XtTarget::Jump(chain)) => w.verdict(out, Some(chain)),
        Some(XtTarget::Dnat(to)) => {
            if to.is_ipv4() != (rule.family == IpFamily::V4) {
                return Err(format!("DNAT to {to} in a {:?} rule", rule.family));
            }
            w.xt(out, "target", "DNAT", 2, &nat_range2(*to));
        }
        Some(XtTarget::Masquerade) => {
            let info = masquerade_info(rule.family);
            w.xt(out, "target", "MASQUERADE", 0, &info);
        }
        None => {}
    }
    Ok(())
}

/// The `NFT_MSG_NEWRULE` request appending `rule` to `table` (sent with
/// `NLM_F_CREATE | NLM_F_APPEND`): its attributes written in one pass
/// into one buffer (see `cni_net::Attrs`), as netlink-packet-netfilter's
/// `RuleMessage` of `RuleAttribute::Table`, `Chain`, `Expressions` and
/// `Compat` would emit them.
fn new_rule(table: &str, rule: &XtRule, w: &mut Written) -> Result<Nfm<Encoded>, String> {
    // A rule of portmap's takes 300-600 bytes.
    let mut body = Attrs::with_capacity(1024);
    body.cstr(NFTA_RULE_TABLE, table)
        .cstr(NFTA_RULE_CHAIN, &rule.chain);
    let exprs = body.nest(NFTA_RULE_EXPRESSIONS | NLA_F_NESTED);
    expressions(&mut body, w, rule)?;
    body.end(exprs);
    gaps::rule_compat(&mut body, rule.protocol.map_or(0, |p| p.name_number().1));
    let mut body = body.finish().map_err(|e| e.to_string())?;
    // Held until the batch is sent: no room to spare.
    body.shrink_to_fit();
    let family = NfFamily::from(rule.family).into();
    Ok(Nfm::nftables(
        NfTablesMessageType::NewRule,
        family,
        Encoded(body),
    ))
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
    let mut w = Written::default();
    let msgs = rules
        .iter()
        .map(|r| new_rule(table, r, &mut w))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NetError::other(&op, e))?;
    crate::nfm::nftables_batch(socket, &msgs, |_| NLM_F_CREATE | NLM_F_APPEND, &op)
}

impl crate::nf_tables::NfTables {
    /// Creates the user chain `chain` of this socket's family's table
    /// `table` and appends `rules` (of that family; to it or to other
    /// chains of the table), in one transaction, as `iptables-restore`
    /// does with `-N chain` and `-A` lines: all of it or nothing. The chain
    /// must be new (`NLM_F_EXCL`, as iptables-nft sends it): when it exists
    /// the kernel refuses the whole batch (`EEXIST`), so two ADDs of one
    /// container never both append. `None` (nothing sent) when a rule
    /// cannot be encoded as iptables-nft 1.8.9 encodes it.
    pub fn new_chain_with_rules(
        &mut self,
        table: &str,
        chain: &str,
        rules: &[XtRule],
    ) -> Option<Result<(), NetError>> {
        let msgs = new_chain_msgs(&[(self.family, chain)], table, rules)
            .map_err(|e| log::debug!("{table} {chain} not encoded: {e}"))
            .ok()?;
        let op = format!("create {table} {chain} with {} rules", rules.len());
        Some(send_new_chain(&mut self.socket, &msgs, &op))
    }
}

type RuleOrChainMsg = Nfm<crate::nfm::RuleOrChain>;

/// Creates the user chains `chains` (family, name) of the tables named
/// `table` and appends `rules` (to them or to other chains of the tables),
/// every family in one transaction, as [`NfTables::new_chain_with_rules`]
/// does for one chain: all of it or nothing; `EEXIST` when a chain exists,
/// `ENOENT` when a table or a chain appended to does not; an error before
/// anything is sent when a rule cannot be encoded as 1.8.9 encodes it.
///
/// [`NfTables::new_chain_with_rules`]: crate::nf_tables::NfTables::new_chain_with_rules
pub fn new_chains_with_rules(
    socket: &mut NfSocket,
    table: &str,
    chains: &[(IpFamily, &str)],
    rules: &[XtRule],
) -> Result<(), NetError> {
    let op = format!(
        "create {} chains of {table} with {} rules",
        chains.len(),
        rules.len()
    );
    let chains: Vec<_> = chains
        .iter()
        .map(|(f, c)| (NfFamily::from(*f).into(), *c))
        .collect();
    let msgs = new_chain_msgs(&chains, table, rules).map_err(|e| NetError::other(&op, e))?;
    send_new_chain(socket, &msgs, &op)
}

/// `NFT_MSG_NEWCHAIN` of each of `chains` (user chains: table and name
/// only), then `rules`' `NFT_MSG_NEWRULE`s.
fn new_chain_msgs(
    chains: &[(netlink_packet_netfilter::NetfilterProtoFamily, &str)],
    table: &str,
    rules: &[XtRule],
) -> Result<Vec<RuleOrChainMsg>, String> {
    use crate::nfm::RuleOrChain;
    use netlink_packet_netfilter::nftables::{ChainAttribute, ChainMessage};
    let mut msgs: Vec<RuleOrChainMsg> = chains
        .iter()
        .map(|(family, chain)| {
            let body = RuleOrChain::Chain(ChainMessage {
                attributes: vec![
                    ChainAttribute::Table(table.to_string()),
                    ChainAttribute::Name(chain.to_string()),
                ],
            });
            Nfm::nftables(NfTablesMessageType::NewChain, *family, body)
        })
        .collect();
    let mut w = Written::default();
    for r in rules {
        let m = new_rule(table, r, &mut w)?;
        msgs.push(Nfm {
            kind: m.kind,
            header: m.header,
            body: RuleOrChain::Encoded(m.body),
        });
    }
    Ok(msgs)
}

fn send_new_chain(
    socket: &mut NfSocket,
    msgs: &[RuleOrChainMsg],
    op: &str,
) -> Result<(), NetError> {
    use crate::nfm::RuleOrChain;
    let flags = |m: &RuleOrChainMsg| match m.body {
        RuleOrChain::Chain(_) => NLM_F_EXCL,
        RuleOrChain::Rule(_) | RuleOrChain::Encoded(_) => NLM_F_CREATE | NLM_F_APPEND,
    };
    crate::nfm::nftables_batch(socket, msgs, flags, op)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use netlink_packet_netfilter::nftables::{RuleAttribute, RuleMessage};

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
                destination: Some(a.into()),
                not_destination: false,
                protocol: None,
                matches: vec![XtMatch::CtState(CT_RELATED | CT_ESTABLISHED)],
                target: Some(XtTarget::Accept),
            },
            XtRule {
                family,
                chain: "CNI-FORWARD".into(),
                source: Some(a.into()),
                destination: None,
                not_destination: false,
                protocol: None,
                matches: vec![],
                target: Some(XtTarget::Accept),
            },
            XtRule {
                family,
                chain: "CNI-FW-ATTACHMENTS".into(),
                source: Some(a.into()),
                destination: None,
                not_destination: false,
                protocol: None,
                matches: vec![XtMatch::Comment(comment.into())],
                target: None,
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

    /// What `iptables-restore --noflush` (iptables v1.8.9 (nf_tables)) sent
    /// for the masquerade rules of `10.181.0.2/24` (`fd00:181::2/64`) in a
    /// table `nat` that had none of them:
    ///
    /// ```text
    /// :CNI-0123456789abcdef01234567 - [0:0]
    /// -A CNI-0123456789abcdef01234567 -d 10.181.0.0/24 -m comment --comment "name: \"n\" id: \"c\"" -j ACCEPT
    /// -A CNI-0123456789abcdef01234567 ! -d 224.0.0.0/4 -m comment --comment "name: \"n\" id: \"c\"" -j MASQUERADE
    /// -A POSTROUTING -s 10.181.0.2/32 -m comment --comment "name: \"n\" id: \"c\"" -j CNI-0123456789abcdef01234567
    /// ```
    ///
    /// (`fd00:181::/64`, `ff00::/8`, `fd00:181::2/128` for IPv6): the
    /// bodies of its `NFT_MSG_NEWCHAIN` of the chain and of its three
    /// `NFT_MSG_NEWRULE`s (it also sent `NEWTABLE nat` and the
    /// `POSTROUTING` base chain, which it creates when missing), captured
    /// with `strace -e write=all`.
    const MASQ_V4: &str = include_str!("testdata/iptables-nft-1.8.9-masq-v4.hex");
    const MASQ_V6: &str = include_str!("testdata/iptables-nft-1.8.9-masq-v6.hex");
    pub(crate) const MASQ_CHAIN: &str = "CNI-0123456789abcdef01234567";

    /// The captured masquerade rules of `family`: the chain's two (the
    /// subnet's ACCEPT, MASQUERADE but to multicast), the POSTROUTING jump.
    pub(crate) fn masq_rules(family: IpFamily) -> [XtRule; 3] {
        let (sub, multicast, host) = match family {
            IpFamily::V4 => ("10.181.0.0/24", "224.0.0.0/4", "10.181.0.2/32"),
            IpFamily::V6 => ("fd00:181::/64", "ff00::/8", "fd00:181::2/128"),
        };
        let rule = |chain: &str, source: Option<&str>, destination: &str, target| XtRule {
            family,
            chain: chain.into(),
            source: source.map(|s| s.parse().unwrap()),
            destination: (!destination.is_empty()).then(|| destination.parse().unwrap()),
            not_destination: destination == multicast,
            protocol: None,
            matches: vec![XtMatch::Comment(r#"name: "n" id: "c""#.into())],
            target: Some(target),
        };
        [
            rule(MASQ_CHAIN, None, sub, XtTarget::Accept),
            rule(MASQ_CHAIN, None, multicast, XtTarget::Masquerade),
            rule(
                "POSTROUTING",
                Some(host),
                "",
                XtTarget::Jump(MASQ_CHAIN.into()),
            ),
        ]
    }

    /// The netlink messages of one captured batch: (type, body after the
    /// netlink header).
    fn batch_messages(batch: &[u8]) -> Vec<(u16, &[u8])> {
        let mut at = 0;
        let mut msgs = Vec::new();
        while at < batch.len() {
            let len = u32::from_ne_bytes(batch[at..at + 4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(batch[at + 4..at + 6].try_into().unwrap());
            msgs.push((kind, &batch[at + 16..at + len]));
            at += (len + 3) & !3;
        }
        msgs
    }

    /// A new chain, a prefix match, a negated one with a mask, the
    /// MASQUERADE target and a jump, per family, as 1.8.9 sends them.
    #[test]
    fn nm_masquerade_encodes_as_iptables_nft_1_8_9() {
        for (family, capture) in [(IpFamily::V4, MASQ_V4), (IpFamily::V6, MASQ_V6)] {
            let rules = masq_rules(family);
            let mut socket = NfSocket::capture("nf_tables");
            new_chains_with_rules(&mut socket, "nat", &[(family, MASQ_CHAIN)], &rules).unwrap();
            let sent = socket.captured();
            let msgs = batch_messages(&sent[0]);
            let theirs: Vec<Vec<u8>> = capture.lines().map(hex).collect();
            assert_eq!(msgs.len(), 2 + theirs.len(), "{family:?}");
            for (i, ((kind, body), want)) in msgs[1..].iter().zip(&theirs).enumerate() {
                let want_kind = if i == 0 { 0x0a03 } else { 0x0a06 };
                assert_eq!(*kind, want_kind, "{family:?} message {i}");
                assert_eq!(body, want, "{family:?} message {i}: body");
            }
            let texts: Vec<String> = rules.iter().map(XtRule::text).collect();
            let q = r#"-m comment --comment "name: \"n\" id: \"c\"""#;
            let [sub, multicast, host] = match family {
                IpFamily::V4 => ["10.181.0.0/24", "224.0.0.0/4", "10.181.0.2/32"],
                IpFamily::V6 => ["fd00:181::/64", "ff00::/8", "fd00:181::2/128"],
            };
            assert_eq!(
                texts,
                [
                    format!("-d {sub} {q} -j ACCEPT"),
                    format!("! -d {multicast} {q} -j MASQUERADE"),
                    format!("-s {host} {q} -j {MASQ_CHAIN}"),
                ]
            );
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
        let new_rule = |t, r: &XtRule| new_rule(t, r, &mut Written::default()).map(|_| ());
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
    fn listing(v6: bool, table: &str) -> (String, String) {
        let run = |cmd: &str, args: &[&str]| {
            let out = std::process::Command::new(cmd).args(args).output().unwrap();
            assert!(out.status.success(), "{cmd} {args:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let family = if v6 { "ip6" } else { "ip" };
        let nft = run("nft", &["--debug=netlink", "list", "table", family, table]);
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
    fn raw_rules(table: &str) -> Vec<Vec<u8>> {
        use netlink_packet_core::{NLM_F_DUMP, NlasIterator};
        let mut socket = NfSocket::open("nf_tables").unwrap();
        let mut out = Vec::new();
        for family in [NfFamily::Ip, NfFamily::Ip6] {
            let dump = RuleMessage {
                attributes: vec![RuleAttribute::Table(table.into())],
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
                    (
                        listing(false, "filter"),
                        listing(true, "filter"),
                        raw_rules("filter"),
                    )
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

    /// The masquerade rules and their new chains, added in one batch for
    /// both families, are stored as iptables-nft-restore stores their
    /// text: `iptables-save`, `nft --debug=netlink` and the kernel's dump
    /// of `nat` are the same (IPv4 and IPv6); each rule read back is
    /// recognised as itself only (`-d` and `! -d` differ).
    #[test]
    fn nm_masquerade_rules_are_stored_as_iptables_nft_stores_them() {
        if skip_without_iptables_nft(
            "iptables_nft::nm_masquerade_rules_are_stored_as_iptables_nft_stores_them",
        ) {
            return;
        }
        let nat = "*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
        let rules: Vec<XtRule> = [IpFamily::V4, IpFamily::V6]
            .into_iter()
            .flat_map(masq_rules)
            .collect();
        let mut got = Vec::new();
        for ours in [false, true] {
            let ns = cni_net::NetNs::new_anonymous().unwrap();
            got.push(
                ns.run(|| {
                    for v6 in [false, true] {
                        iptables_nft_restore(v6, nat);
                    }
                    if ours {
                        let chains = [(IpFamily::V4, MASQ_CHAIN), (IpFamily::V6, MASQ_CHAIN)];
                        let mut socket = NfSocket::open("nf_tables").unwrap();
                        new_chains_with_rules(&mut socket, "nat", &chains, &rules).unwrap();
                        // A chain that exists: nothing added.
                        let again = new_chains_with_rules(&mut socket, "nat", &chains, &rules);
                        assert!(again.is_err());
                    } else {
                        for (v6, rules) in [(false, &rules[..3]), (true, &rules[3..])] {
                            let mut text = format!("*nat\n:{MASQ_CHAIN} - [0:0]\n");
                            for r in rules {
                                text += &format!("-A {} {}\n", r.chain, r.text());
                            }
                            iptables_nft_restore(v6, &(text + "COMMIT\n"));
                        }
                    }
                    for r in &rules {
                        let mut t = crate::nf_tables::NfTables::open(r.family).unwrap();
                        let read = t.chain_rules("nat", &r.chain).unwrap();
                        let hits = read.iter().filter(|s| r.is_stored_as(s)).count();
                        assert_eq!(hits, 1, "{ours} {}", r.text());
                    }
                    let mut unmasked = rules[1].clone();
                    unmasked.not_destination = false;
                    let mut t = crate::nf_tables::NfTables::open(IpFamily::V4).unwrap();
                    let read = t.chain_rules("nat", MASQ_CHAIN).unwrap();
                    assert!(!read.iter().any(|s| unmasked.is_stored_as(s)));
                    (
                        listing(false, "nat"),
                        listing(true, "nat"),
                        raw_rules("nat"),
                    )
                })
                .unwrap(),
            );
        }
        assert_eq!(got[0], got[1]);
        assert_eq!(got[1].2.len(), 6, "rules added");
        for r in &rules {
            let listed = if r.family == IpFamily::V4 {
                &got[1].0
            } else {
                &got[1].1
            };
            let line = format!("-A {} {}", r.chain, r.text());
            assert!(listed.1.contains(&line), "{line} in {}", listed.1);
        }
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
