//! The iptables backend: the reference's chains in table `nat`, written in
//! exactly the form `iptables-save` prints them, so that what we write reads
//! back byte for byte and CHECK is a comparison of lines.
//!
//! ```text
//! PREROUTING, OUTPUT:    -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
//! POSTROUTING (first):   -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
//! CNI-HOSTPORT-SETMARK:  -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
//! CNI-HOSTPORT-MASQ:     -m mark --mark 0x2000/0x2000 -j MASQUERADE
//! CNI-HOSTPORT-DNAT:     -p tcp -m comment --comment "dnat name: \"net\" id: \"cid\"" -m multiport --dports 8080,8081 -j CNI-DN-<hash>
//! CNI-DN-<hash>:         -s 10.1.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
//!                        -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
//!                        -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.2:80
//! ```
//!
//! This is the general path: every ADD, DEL and GC is one `iptables-save
//! -t nat` read and at most one `iptables-restore --noflush -w` transaction
//! per family, under the portmap lock. The fast paths beside it are modules
//! of their own, each deletable alone, each saying what it saves:
//! [`crate::ipt_fast_add`] (ADD without the read), [`crate::ipt_netlink_del`]
//! (DEL over netlink, iptables-nft) and [`crate::ipt_blind_del`] (DEL
//! without the read).

use crate::config::{Conf, Proto};
use cni_fw::hash::{chain_name_with_prefix, go_quote};
use cni_fw::iptables::{self, Family, Table, XtMatch, XtProto, XtRule, XtTarget, quote};
use cni_skel::CniError;
use ipnetwork::IpNetwork;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// The shared chain holding one entry per container and protocol.
pub const DNAT_CHAIN: &str = "CNI-HOSTPORT-DNAT";
/// The chain marking traffic for masquerade.
pub const SETMARK_CHAIN: &str = "CNI-HOSTPORT-SETMARK";
/// The chain masquerading marked traffic.
pub const MASQ_CHAIN: &str = "CNI-HOSTPORT-MASQ";
/// The chain old releases entered the per-container SNAT chains from.
const OLD_SNAT_CHAIN: &str = "CNI-HOSTPORT-SNAT";
pub(crate) const TABLE: &str = "nat";

/// The per-container chain `CNI-DN-<hash(net+cid)>`.
pub fn dnat_chain(network: &str, container_id: &str) -> String {
    chain_name_with_prefix(network, container_id, "DN-")
}

fn old_snat_chain(network: &str, container_id: &str) -> String {
    chain_name_with_prefix(network, container_id, "SN-")
}

/// `dnat name: "<net>" id: "<cid>"`, cut to iptables' limit of 255
/// characters. (The reference cuts to 256, which iptables refuses.)
pub fn dnat_comment(network: &str, container_id: &str) -> String {
    let c = format!(
        "dnat name: {} id: {}",
        go_quote(network),
        go_quote(container_id)
    );
    if c.len() <= 255 {
        return c;
    }
    // Names are ASCII (validated by the skel).
    format!("{}...", c.get(..252).unwrap_or_default())
}

fn mark(bit: u32) -> String {
    let v = 1u32 << bit;
    format!("{v:#x}/{v:#x}")
}

pub(crate) fn setmark_rule(bit: u32) -> String {
    format!(
        "-m comment --comment \"CNI portfwd masquerade mark\" -j MARK --set-xmark {}",
        mark(bit)
    )
}

pub(crate) fn masq_rule(bit: u32) -> String {
    format!("-m mark --mark {} -j MASQUERADE", mark(bit))
}

pub(crate) fn postrouting_rule() -> String {
    format!("-m comment --comment \"CNI portfwd requiring masquerade\" -j {MASQ_CHAIN}")
}

pub(crate) fn dnat_entry_rule() -> String {
    format!("-m addrtype --dst-type LOCAL -j {DNAT_CHAIN}")
}

/// Quotes a user-supplied token for an iptables-restore line when needed.
fn token(t: &str) -> String {
    if !t.is_empty()
        && !t.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        t.to_string()
    } else {
        quote(t)
    }
}

/// The rules of one container in one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRules {
    /// `CNI-DN-<hash>`.
    pub chain: String,
    /// The rules in it, in order.
    pub rules: Vec<String>,
    /// The entries in `CNI-HOSTPORT-DNAT` jumping to it.
    pub entries: Vec<String>,
    /// True when the entries carry user conditions (their printed form is
    /// then up to iptables).
    pub conditioned: bool,
}

/// The rules of one container in one family as [`XtRule`] values: the
/// container's chain, the rules in it, and the entries of
/// `CNI-HOSTPORT-DNAT` jumping to it, without the user's conditions. One
/// description, two renderings: [`container_rules`]' text for
/// iptables-restore and the saved table, iptables-nft's netlink
/// expressions for [`crate::ipt_fast_add`].
pub(crate) fn container_xt(
    conf: &Conf,
    container_id: &str,
    addr: IpNetwork,
) -> (String, Vec<XtRule>, Vec<XtRule>) {
    let v6 = addr.is_ipv6();
    let chain = dnat_chain(&conf.network, container_id);
    let rule = |chain: &str, proto: Proto, matches, target| XtRule {
        family: family(v6),
        chain: chain.to_string(),
        source: None,
        destination: None,
        not_destination: false,
        protocol: Some(match proto {
            Proto::Tcp => XtProto::Tcp,
            Proto::Udp => XtProto::Udp,
            Proto::Sctp => XtProto::Sctp,
        }),
        matches,
        target: Some(target),
    };
    // Entries per protocol (sorted), at most 15 ports each (multiport's
    // limit). As in the reference, every mapping's port is listed, even one
    // whose hostIP is of the other family.
    let mut by_proto: BTreeMap<Proto, Vec<u16>> = BTreeMap::new();
    for m in &conf.mappings {
        by_proto.entry(m.proto).or_default().push(m.host_port);
    }
    let comment = dnat_comment(&conf.network, container_id);
    let mut entries = Vec::new();
    for (proto, ports) in &by_proto {
        for group in ports.chunks(15) {
            let matches = vec![
                XtMatch::Comment(comment.clone()),
                XtMatch::Multiport(group.to_vec()),
            ];
            entries.push(rule(
                DNAT_CHAIN,
                *proto,
                matches,
                XtTarget::Jump(chain.clone()),
            ));
        }
    }
    let setmark = conf
        .external_set_mark_chain
        .as_deref()
        .unwrap_or(SETMARK_CHAIN);
    // The sources whose traffic is marked for masquerade (masqAll: all,
    // which iptables-save prints without `-s`).
    let sources = match (conf.snat, conf.masq_all) {
        (false, _) => vec![],
        (true, true) => vec![None],
        (true, false) if v6 => vec![IpNetwork::new(addr.network(), addr.prefix()).ok()],
        (true, false) => vec![
            IpNetwork::new(addr.network(), addr.prefix()).ok(),
            Some(IpNetwork::from(IpAddr::from([127, 0, 0, 1]))),
        ],
    };
    let mut rules = Vec::new();
    for m in conf.mappings.iter().filter(|m| m.applies_to(v6)) {
        let here = |source: Option<IpNetwork>, target| XtRule {
            source,
            destination: m.dest().map(IpNetwork::from),
            not_destination: false,
            ..rule(&chain, m.proto, vec![XtMatch::Dport(m.host_port)], target)
        };
        for src in &sources {
            rules.push(here(*src, XtTarget::Jump(setmark.to_string())));
        }
        let to = SocketAddr::new(addr.ip(), m.container_port);
        rules.push(here(None, XtTarget::Dnat(to)));
    }
    (chain, rules, entries)
}

/// Builds the rules for the container address `addr`.
pub fn container_rules(conf: &Conf, container_id: &str, addr: IpNetwork) -> ContainerRules {
    let (chain, rules, entries) = container_xt(conf, container_id, addr);
    let conds: Vec<String> = conf
        .conditions(addr.is_ipv6())
        .iter()
        .map(|t| token(t))
        .collect();
    // The user's conditions go after the matches, before the jump.
    let entries = entries
        .into_iter()
        .map(|mut e| {
            e.target = None;
            let mut r = e.text();
            for c in &conds {
                r.push(' ');
                r.push_str(c);
            }
            format!("{r} -j {chain}")
        })
        .collect();
    ContainerRules {
        chain,
        rules: rules.iter().map(XtRule::text).collect(),
        entries,
        conditioned: !conds.is_empty(),
    }
}

pub(crate) fn family(v6: bool) -> Family {
    if v6 { Family::V6 } else { Family::V4 }
}

/// Reads the `nat` table of a family.
pub fn save(v6: bool) -> Result<Table, CniError> {
    iptables::save(family(v6), TABLE).map_err(|e| {
        e.into_cni(if v6 {
            "ip6tables-save"
        } else {
            "iptables-save"
        })
    })
}

pub(crate) fn restore(v6: bool, lines: &[String]) -> Result<(), CniError> {
    iptables::restore(family(v6), TABLE, lines).map_err(|e| {
        e.into_cni(if v6 {
            "ip6tables-restore"
        } else {
            "iptables-restore"
        })
    })
}

/// The lines (for one restore) that set up `addr`'s forwarding, given the
/// current table.
pub fn add_lines(conf: &Conf, container_id: &str, addr: IpNetwork, table: &Table) -> Vec<String> {
    let c = container_rules(conf, container_id, addr);
    let mut decl = Vec::new();
    let mut lines = Vec::new();
    let has_rule = |chain: &str, rule: &str| table.rules(chain).any(|r| r == rule);
    if conf.snat && conf.external_set_mark_chain.is_none() {
        for (chain, rule) in [
            (SETMARK_CHAIN, setmark_rule(conf.mark_bit)),
            (MASQ_CHAIN, masq_rule(conf.mark_bit)),
        ] {
            if !table.has_chain(chain) {
                decl.push(format!(":{chain} - [0:0]"));
            }
            if !has_rule(chain, &rule) {
                lines.push(format!("-A {chain} {rule}"));
            }
        }
        let entry = postrouting_rule();
        if !has_rule("POSTROUTING", &entry) {
            lines.push(format!("-I POSTROUTING 1 {entry}"));
        }
    }
    if !table.has_chain(DNAT_CHAIN) {
        decl.push(format!(":{DNAT_CHAIN} - [0:0]"));
    }
    let entry = dnat_entry_rule();
    for chain in ["PREROUTING", "OUTPUT"] {
        if !has_rule(chain, &entry) {
            lines.push(format!("-A {chain} {entry}"));
        }
    }
    // The container's chain is declared, which creates it or empties it, then
    // filled. Its entries are replaced unless they are already exactly right.
    let jump = format!(" -j {}", c.chain);
    let existing: Vec<&str> = table
        .rules(DNAT_CHAIN)
        .filter(|r| r.ends_with(&jump))
        .collect();
    let same_entries =
        !c.conditioned && existing == c.entries.iter().map(String::as_str).collect::<Vec<_>>();
    decl.push(format!(":{} - [0:0]", c.chain));
    if !same_entries {
        lines.extend(existing.iter().map(|r| format!("-D {DNAT_CHAIN} {r}")));
    }
    lines.extend(c.rules.iter().map(|r| format!("-A {} {r}", c.chain)));
    if !same_entries {
        lines.extend(c.entries.iter().map(|r| format!("-A {DNAT_CHAIN} {r}")));
    }
    decl.extend(lines);
    decl
}

/// Sets up forwarding to `addr` (one family) from a read of the table: one
/// transaction computed from it (creating the shared chains where they are
/// missing). Under the portmap lock, which serialises this
/// read-modify-write.
pub fn add(conf: &Conf, container_id: &str, addr: IpNetwork) -> Result<(), CniError> {
    let v6 = addr.is_ipv6();
    let table = save(v6).map_err(|e| e.context("failed to open iptables"))?;
    restore(v6, &add_lines(conf, container_id, addr, &table))
        .map_err(|e| e.context("unable to set up iptables rules for port mappings"))
}

/// Lines removing `chain` and every rule in `entry_chain` that jumps to it.
fn delete_chain_lines(table: &Table, chain: &str, entry_chain: &str) -> Vec<String> {
    if !table.has_chain(chain) {
        return Vec::new();
    }
    let jump = format!(" -j {chain}");
    let mut lines: Vec<String> = table
        .rules(entry_chain)
        .filter(|r| r.ends_with(&jump))
        .map(|r| format!("-D {entry_chain} {r}"))
        .collect();
    lines.push(format!("-F {chain}"));
    lines.push(format!("-X {chain}"));
    lines
}

/// The lines removing one container's chains.
pub fn del_lines(network: &str, container_id: &str, table: &Table) -> Vec<String> {
    let mut lines = delete_chain_lines(table, &dnat_chain(network, container_id), DNAT_CHAIN);
    lines.extend(delete_chain_lines(
        table,
        &old_snat_chain(network, container_id),
        OLD_SNAT_CHAIN,
    ));
    lines
}

/// Removes one container's rules from both families. A family whose
/// iptables cannot be used is skipped; it is an error only when neither can.
pub fn del(conf: &Conf, container_id: &str) -> Result<(), CniError> {
    del_in(conf, container_id, &[false, true])
}

/// [`del`] in the families `v6s` only (`false`: IPv4, `true`: IPv6); an
/// error when none of them can be used.
pub fn del_in(conf: &Conf, container_id: &str, v6s: &[bool]) -> Result<(), CniError> {
    let network = conf.network.as_str();
    let mut unusable = Vec::new();
    for &v6 in v6s {
        // The fast paths, each deletable alone (see their modules).
        if crate::ipt_netlink_del::del(conf, container_id, v6)
            || crate::ipt_blind_del::del(conf, container_id, v6)
        {
            continue;
        }
        let table = match save(v6) {
            Ok(t) => t,
            Err(e) => {
                unusable.push(e.msg);
                continue;
            }
        };
        restore(v6, &del_lines(network, container_id, &table)).map_err(|e| {
            e.context(format!(
                "could not teardown {} dnat",
                if v6 { "ipv6" } else { "ipv4" }
            ))
        })?;
    }
    if !v6s.is_empty() && unusable.len() == v6s.len() {
        return Err(CniError::internal(format!(
            "neither iptables nor ip6tables is usable: {}",
            unusable.join("; ")
        )));
    }
    Ok(())
}

/// Verifies that every rule of the container's address `addr` exists in
/// `table` (that family's `nat` table).
pub fn check_table(
    conf: &Conf,
    container_id: &str,
    addr: IpNetwork,
    table: &Table,
) -> Result<(), CniError> {
    let c = container_rules(conf, container_id, addr);
    let fam = if addr.is_ipv6() {
        "ip6tables"
    } else {
        "iptables"
    };
    let missing = |chain: &str, rule: &str| {
        CniError::internal(format!(
            "{fam}: rule \"{rule}\" not found in chain {chain} of table nat"
        ))
    };
    if !table.has_chain(&c.chain) {
        return Err(CniError::internal(format!(
            "{fam}: chain {} not found in table nat",
            c.chain
        )));
    }
    let actual: Vec<&str> = table.rules(&c.chain).collect();
    for r in &c.rules {
        if !actual.contains(&r.as_str()) {
            return Err(missing(&c.chain, r));
        }
    }
    let jump = format!(" -j {}", c.chain);
    let entries: Vec<&str> = table
        .rules(DNAT_CHAIN)
        .filter(|r| r.ends_with(&jump))
        .collect();
    for e in &c.entries {
        let found = if c.conditioned {
            // With user conditions iptables decides the printed order; match
            // on what identifies the entry.
            let ports = e
                .split(" --dports ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .unwrap_or_default();
            let proto = e.split(' ').nth(1).unwrap_or_default();
            entries.iter().any(|a| {
                a.contains(&format!("-p {proto} ")) && a.contains(&format!("--dports {ports} "))
            })
        } else {
            entries.contains(&e.as_str())
        };
        if !found {
            return Err(missing(DNAT_CHAIN, e));
        }
    }
    let entry = dnat_entry_rule();
    for chain in ["PREROUTING", "OUTPUT"] {
        if !table.rules(chain).any(|r| r == entry) {
            return Err(missing(chain, &entry));
        }
    }
    if conf.snat && conf.external_set_mark_chain.is_none() {
        for (chain, rule) in [
            (SETMARK_CHAIN, setmark_rule(conf.mark_bit)),
            (MASQ_CHAIN, masq_rule(conf.mark_bit)),
            ("POSTROUTING", postrouting_rule()),
        ] {
            if !table.rules(chain).any(|r| r == rule) {
                return Err(missing(chain, &rule));
            }
        }
    }
    Ok(())
}

/// `(network, container ID)` from an entry's comment, when it was not cut.
fn entry_owner(rule: &str) -> Option<(&str, &str)> {
    let start = rule.find("--comment \"dnat name: \\\"")? + "--comment \"dnat name: \\\"".len();
    let rest = rule.get(start..)?;
    let (net, rest) = rest.split_once("\\\" id: \\\"")?;
    let (cid, _) = rest.split_once("\\\"\"")?;
    Some((net, cid))
}

/// The lines removing the chains of every container of `network` that is
/// not in `valid`.
pub fn gc_lines(network: &str, valid: &[String], table: &Table) -> Vec<String> {
    let mut stale: Vec<String> = table
        .rules(DNAT_CHAIN)
        .filter_map(entry_owner)
        .filter(|(net, cid)| *net == network && !valid.iter().any(|v| v == cid))
        .map(|(_, cid)| cid.to_string())
        .collect();
    stale.sort();
    stale.dedup();
    stale
        .iter()
        .flat_map(|cid| del_lines(network, cid, table))
        .collect()
}

/// GC in both families; a family whose iptables is unusable is skipped.
pub fn gc(network: &str, valid: &[String]) -> Result<(), CniError> {
    for v6 in [false, true] {
        let Ok(table) = save(v6) else { continue };
        restore(v6, &gc_lines(network, valid, &table))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_text as parse;

    fn conf(extra: &str) -> Conf {
        parse(
            format!(
                r#"{{"name":"pmx","runtimeConfig":{{"portMappings":[
                {{"hostPort":8080,"containerPort":80,"protocol":"tcp"}},
                {{"hostPort":8081,"containerPort":81,"protocol":"udp"}},
                {{"hostPort":8082,"containerPort":82,"protocol":"tcp","hostIP":"10.60.99.1"}}]}}{extra}}}"#
            )
            .as_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn rules_match_the_reference_save_output() {
        // As iptables-save printed the Go reference's rules for this input.
        let c = container_rules(&conf(""), "c1", "10.60.99.2/24".parse().unwrap());
        assert_eq!(c.chain, "CNI-DN-eb320ac595a35c74288c0");
        assert_eq!(
            c.rules,
            vec![
                "-s 10.60.99.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.60.99.2:80",
                "-s 10.60.99.0/24 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
                "-p udp -m udp --dport 8081 -j DNAT --to-destination 10.60.99.2:81",
                "-s 10.60.99.0/24 -d 10.60.99.1/32 -p tcp -m tcp --dport 8082 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -d 10.60.99.1/32 -p tcp -m tcp --dport 8082 -j CNI-HOSTPORT-SETMARK",
                "-d 10.60.99.1/32 -p tcp -m tcp --dport 8082 -j DNAT --to-destination 10.60.99.2:82",
            ]
        );
        assert_eq!(
            c.entries,
            vec![
                r#"-p tcp -m comment --comment "dnat name: \"pmx\" id: \"c1\"" -m multiport --dports 8080,8082 -j CNI-DN-eb320ac595a35c74288c0"#,
                r#"-p udp -m comment --comment "dnat name: \"pmx\" id: \"c1\"" -m multiport --dports 8081 -j CNI-DN-eb320ac595a35c74288c0"#,
            ]
        );
        let c6 = container_rules(&conf(""), "c1", "fd60:99::2/64".parse().unwrap());
        assert_eq!(
            c6.rules,
            vec![
                "-s fd60:99::/64 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd60:99::2]:80",
                "-s fd60:99::/64 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
                "-p udp -m udp --dport 8081 -j DNAT --to-destination [fd60:99::2]:81",
            ]
        );
        assert_eq!(c6.entries, c.entries);
    }

    #[test]
    fn options_change_the_rules() {
        let c = container_rules(
            &conf(r#","snat":false"#),
            "c1",
            "10.60.99.2/24".parse().unwrap(),
        );
        assert_eq!(c.rules.len(), 3);
        let c = container_rules(
            &conf(r#","masqAll":true"#),
            "c1",
            "10.60.99.2/24".parse().unwrap(),
        );
        assert_eq!(
            c.rules[0],
            "-p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK"
        );
        assert_eq!(c.rules.len(), 6);
        let c = container_rules(
            &conf(
                r#","externalSetMarkChain":"KUBE-MARK-MASQ","conditionsV4":["-s","1.2.3.4","-m","comment","--comment","a b"]"#,
            ),
            "c1",
            "10.60.99.2/24".parse().unwrap(),
        );
        assert!(c.rules[0].ends_with("-j KUBE-MARK-MASQ"));
        assert!(c.conditioned);
        assert!(c.entries[0].ends_with(r#"--dports 8080,8082 -s 1.2.3.4 -m comment --comment "a b" -j CNI-DN-eb320ac595a35c74288c0"#));
        let many: Vec<String> = (1..=20)
            .map(|p| format!(r#"{{"hostPort":{p},"containerPort":80,"protocol":"tcp"}}"#))
            .collect();
        let c = parse(
            format!(
                r#"{{"name":"n","runtimeConfig":{{"portMappings":[{}]}}}}"#,
                many.join(",")
            )
            .as_bytes(),
        )
        .unwrap();
        let r = container_rules(&c, "x", "10.0.0.2/24".parse().unwrap());
        assert_eq!(r.entries.len(), 2);
        assert!(r.entries[0].contains("--dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 "));
        assert!(r.entries[1].contains("--dports 16,17,18,19,20 "));
        assert_eq!(mark(0), "0x1/0x1");
        assert_eq!(mark(31), "0x80000000/0x80000000");
    }

    #[test]
    fn add_on_an_empty_table_then_again() {
        let conf = conf("");
        let addr: IpNetwork = "10.60.99.2/24".parse().unwrap();
        let empty = Table::from_text("");
        let lines = add_lines(&conf, "c1", addr, &empty);
        assert_eq!(lines[0], ":CNI-HOSTPORT-SETMARK - [0:0]");
        assert!(lines.contains(&"-I POSTROUTING 1 -m comment --comment \"CNI portfwd requiring masquerade\" -j CNI-HOSTPORT-MASQ".to_string()));
        // Feed our own output back as iptables-save would print it.
        let mut saved = String::new();
        let c = container_rules(&conf, "c1", addr);
        for l in &lines {
            if let Some(d) = l.strip_prefix(':') {
                saved.push_str(&format!(":{d}\n"));
            }
        }
        for l in &lines {
            if let Some(r) = l.strip_prefix("-A ") {
                saved.push_str(&format!("-A {r}\n"));
            } else if let Some(r) = l.strip_prefix("-I POSTROUTING 1 ") {
                saved.push_str(&format!("-A POSTROUTING {r}\n"));
            }
        }
        let again = add_lines(&conf, "c1", addr, &Table::from_text(saved.clone()));
        // Only the container chain is declared (emptied) and refilled.
        let mut expect = vec![format!(":{} - [0:0]", c.chain)];
        expect.extend(c.rules.iter().map(|r| format!("-A {} {r}", c.chain)));
        assert_eq!(again, expect);

        let del = del_lines("pmx", "c1", &Table::from_text(saved.clone()));
        assert_eq!(del.len(), 4);
        assert!(del[0].starts_with("-D CNI-HOSTPORT-DNAT -p tcp "));
        assert_eq!(del[3], format!("-X {}", c.chain));
        assert!(del_lines("pmx", "other", &Table::from_text(saved.clone())).is_empty());

        let t = Table::from_text(saved);
        assert!(check_table(&conf, "c1", addr, &t).is_ok());
        assert!(check_table(&conf, "c2", addr, &t).is_err());
        let other: IpNetwork = "10.60.99.3/24".parse().unwrap();
        assert!(check_table(&conf, "c1", other, &t).is_err());

        assert_eq!(gc_lines("pmx", &["c1".into()], &t), Vec::<String>::new());
        assert_eq!(gc_lines("other-net", &[], &t), Vec::<String>::new());
        assert_eq!(gc_lines("pmx", &[], &t).len(), 4);
    }

    #[test]
    fn owners_from_comments() {
        let r = r#"-p tcp -m comment --comment "dnat name: \"pmx\" id: \"c1\"" -m multiport --dports 8080 -j CNI-DN-x"#;
        assert_eq!(entry_owner(r), Some(("pmx", "c1")));
        assert_eq!(entry_owner("-p tcp -j X"), None);
        let long = "x".repeat(300);
        assert!(dnat_comment("n", &long).ends_with("..."));
        assert_eq!(dnat_comment("n", &long).len(), 255);
    }
}
