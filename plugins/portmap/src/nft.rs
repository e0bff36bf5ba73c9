//! The nftables backend: tables `ip cni_hostport` and `ip6 cni_hostport`
//! with the reference's chains, every rule of a container commented with
//! exactly its container ID (so the reference's DEL, which deletes by
//! comment, still works on our rules and ours on its).
//!
//! ```text
//! prerouting   (nat, prerouting, dstnat):  [conditions] fib daddr type local jump hostports_all
//! output       (nat, output, dstnat):      [conditions] fib daddr type local jump hostports_all
//! hostports_all:                           jump hostip_hostports; jump hostports
//! hostip_hostports:                        (legacy, kept empty)
//! hostports:                               [ip daddr H] tcp dport 8080 dnat to 10.1.0.2:80 comment "<cid>"
//! masquerading (nat, postrouting, srcnat): ip saddr 10.1.0.0/24 ip daddr 10.1.0.2 ct status dnat masquerade comment "<cid>"
//!                                          ip saddr 127.0.0.1 ip daddr 10.1.0.2 masquerade comment "<cid>"
//! net_<hash(network)>:                     return comment "<cid>"   (GC bookkeeping, never jumped to)
//! ```
//!
//! The hairpin rule masquerades DNATed traffic from the container's whole
//! subnet (as the iptables backend does), so a second container on the same
//! bridge reaches the first through a host port; `ct status dnat` keeps
//! plain container-to-container traffic unmasqueraded. (The reference
//! matches only the container's own address.)
//!
//! GC needs to know which container IDs belong to the network; the rule
//! comments must stay the bare container ID. So each ADD also adds one
//! marker rule, commented with the container ID, to a regular chain named
//! after the network (`net_` + 16 hex digits of sha512(network)), never
//! jumped to. DEL removes it with the rules; GC deletes the rules of every
//! marked container that is not valid.

use crate::config::Conf;
use cni_fw::hash::hash_with_prefix;
use cni_fw::nft::{self, TextTable};
use cni_skel::CniError;
use ipnetwork::IpNetwork;

/// The table name in both families.
pub const TABLE: &str = "cni_hostport";
const HOSTPORTS: &str = "hostports";
const HOSTIP_HOSTPORTS: &str = "hostip_hostports";
const HOSTPORTS_ALL: &str = "hostports_all";
const MASQUERADING: &str = "masquerading";
/// Chains holding rules commented with a container ID.
const OWNED: [&str; 3] = [HOSTPORTS, HOSTIP_HOSTPORTS, MASQUERADING];

/// `ip` or `ip6`.
pub fn family(v6: bool) -> &'static str {
    if v6 { "ip6" } else { "ip" }
}

/// The GC bookkeeping chain of a network.
pub fn marker_chain(network: &str) -> String {
    format!("net_{}", hash_with_prefix(16, "", network))
}

/// One rule as nft lists it (without its comment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The chain.
    pub chain: &'static str,
    /// The statements.
    pub text: String,
}

/// The rules of the container address `addr`, as nft prints them.
pub fn container_rules(conf: &Conf, addr: IpNetwork) -> Vec<Rule> {
    let v6 = addr.is_ipv6();
    let ipx = family(v6);
    let ip = addr.ip();
    let mut out = Vec::new();
    for m in conf.mappings.iter().filter(|m| m.applies_to(v6)) {
        let dst = m
            .dest()
            .map(|d| format!("{ipx} daddr {d} "))
            .unwrap_or_default();
        let to = if v6 {
            format!("[{ip}]:{}", m.container_port)
        } else {
            format!("{ip}:{}", m.container_port)
        };
        out.push(Rule {
            chain: HOSTPORTS,
            text: format!("{dst}{} dport {} dnat to {to}", m.proto.name(), m.host_port),
        });
    }
    if conf.snat {
        let text = if conf.masq_all {
            let any = if v6 { "::/0" } else { "0.0.0.0/0" };
            format!("{ipx} saddr {any} {ipx} daddr {ip} masquerade")
        } else {
            format!(
                "{ipx} saddr {}/{} {ipx} daddr {ip} ct status dnat masquerade",
                addr.network(),
                addr.prefix()
            )
        };
        out.push(Rule {
            chain: MASQUERADING,
            text,
        });
        if !v6 && !conf.masq_all {
            out.push(Rule {
                chain: MASQUERADING,
                text: format!("ip saddr 127.0.0.1 ip daddr {ip} masquerade"),
            });
        }
    }
    out
}

/// The shared structure of one family's table, as the reference sets it up
/// on every ADD (the hook chains are rewritten with the current conditions).
fn base_script(conf: &Conf, v6: bool) -> String {
    let f = family(v6);
    let t = TABLE;
    let mut conds = conf.conditions(v6).join(" ");
    if !conds.is_empty() {
        conds.push(' ');
    }
    let mut s = format!(
        "add table {f} {t} {{ comment \"CNI portmap plugin\" ; }}\n\
         add chain {f} {t} {HOSTPORTS}\n\
         add chain {f} {t} {HOSTIP_HOSTPORTS}\n\
         add chain {f} {t} {HOSTPORTS_ALL}\n\
         flush chain {f} {t} {HOSTPORTS_ALL}\n\
         add rule {f} {t} {HOSTPORTS_ALL} jump {HOSTIP_HOSTPORTS}\n\
         add rule {f} {t} {HOSTPORTS_ALL} jump {HOSTPORTS}\n"
    );
    // nft 1.0.6 refuses the `dstnat` keyword on the output hook: use the number.
    for (chain, hook) in [("prerouting", "prerouting"), ("output", "output")] {
        s.push_str(&format!(
            "add chain {f} {t} {chain} {{ type nat hook {hook} priority -100 ; }}\n\
             flush chain {f} {t} {chain}\n\
             add rule {f} {t} {chain} {conds}fib daddr type local jump {HOSTPORTS_ALL}\n"
        ));
    }
    if conf.snat {
        s.push_str(&format!(
            "add chain {f} {t} {MASQUERADING} {{ type nat hook postrouting priority 100 ; }}\n"
        ));
    }
    s
}

/// `delete rule` lines for the rules of `container_id` (and its marker in
/// `marker`, when given).
fn delete_lines(table: &TextTable, v6: bool, container_id: &str, marker: Option<&str>) -> String {
    let f = family(v6);
    table
        .rules
        .iter()
        .filter(|r| r.comment == container_id)
        .filter(|r| OWNED.contains(&r.chain.as_str()) || Some(r.chain.as_str()) == marker)
        .map(|r| format!("delete rule {f} {TABLE} {} handle {}\n", r.chain, r.handle))
        .collect()
}

/// The script setting up `addr`'s forwarding, replacing whatever this
/// container had in that family's table (`existing`).
pub fn add_script(
    conf: &Conf,
    container_id: &str,
    addr: IpNetwork,
    existing: Option<&TextTable>,
) -> String {
    let v6 = addr.is_ipv6();
    let f = family(v6);
    let t = TABLE;
    let marker = marker_chain(&conf.network);
    let mut s = base_script(conf, v6);
    if let Some(table) = existing {
        s.push_str(&delete_lines(table, v6, container_id, Some(&marker)));
    }
    let comment = nft::quote(container_id);
    for r in container_rules(conf, addr) {
        s.push_str(&format!(
            "add rule {f} {t} {} {} comment {comment}\n",
            r.chain, r.text
        ));
    }
    s.push_str(&format!(
        "add chain {f} {t} {marker} {{ comment {} ; }}\n\
         add rule {f} {t} {marker} return comment {comment}\n",
        nft::quote(&format!(
            "CNI portmap: containers of network {}",
            conf.network
        ))
    ));
    s
}

fn list(v6: bool) -> Result<Option<TextTable>, CniError> {
    nft::list_table_text(family(v6), TABLE).map_err(|e| e.into_cni("nft list"))
}

fn apply(script: &str, what: &str) -> Result<(), CniError> {
    nft::apply(script).map_err(|e| e.into_cni(what))
}

/// Sets up forwarding to the container's addresses: one listing per family,
/// one `nft -f -` transaction.
pub fn add(conf: &Conf, container_id: &str, addrs: &[IpNetwork]) -> Result<(), CniError> {
    let mut script = String::new();
    for addr in addrs {
        let existing = list(addr.is_ipv6())?;
        script.push_str(&add_script(conf, container_id, *addr, existing.as_ref()));
    }
    apply(&script, "unable to set up nftables rules for port mappings")
}

/// Removes the container's rules from both families' tables.
pub fn del(network: &str, container_id: &str) -> Result<(), CniError> {
    let marker = marker_chain(network);
    let mut script = String::new();
    for v6 in [false, true] {
        if let Some(table) = list(v6)? {
            script.push_str(&delete_lines(&table, v6, container_id, Some(&marker)));
        }
    }
    apply(&script, "error deleting nftables rules")
}

/// Verifies that every rule of the container address `addr` exists.
pub fn check(conf: &Conf, container_id: &str, addr: IpNetwork) -> Result<(), CniError> {
    let v6 = addr.is_ipv6();
    let Some(table) = list(v6)? else {
        return Err(CniError::internal(format!(
            "table {} {TABLE} not found",
            family(v6)
        )));
    };
    check_table(conf, container_id, addr, &table)
}

/// CHECK against a table already listed.
pub fn check_table(
    conf: &Conf,
    container_id: &str,
    addr: IpNetwork,
    table: &TextTable,
) -> Result<(), CniError> {
    let f = family(addr.is_ipv6());
    for r in container_rules(conf, addr) {
        let found = table
            .rules_of(r.chain)
            .any(|have| have.comment == container_id && have.text == r.text);
        if !found {
            return Err(CniError::internal(format!(
                "missing hostport rule \"{}\" in {f} {TABLE} chain {:?}",
                r.text, r.chain
            )));
        }
    }
    for chain in ["prerouting", "output"] {
        let found = table.rules_of(chain).any(|have| {
            have.text
                .ends_with(&format!("fib daddr type local jump {HOSTPORTS_ALL}"))
        });
        if !found {
            return Err(CniError::internal(format!(
                "missing jump to {HOSTPORTS_ALL} in {f} {TABLE} chain {chain:?}"
            )));
        }
    }
    Ok(())
}

/// The lines removing the rules of every container of `network` not in
/// `valid`, and the network's marker chain when none is left.
pub fn gc_lines(network: &str, valid: &[String], table: &TextTable, v6: bool) -> String {
    let f = family(v6);
    let marker = marker_chain(network);
    let markers: Vec<&str> = table
        .rules_of(&marker)
        .map(|r| r.comment.as_str())
        .collect();
    let mut s = String::new();
    let mut stale: Vec<&str> = markers
        .iter()
        .copied()
        .filter(|cid| !cid.is_empty() && !valid.iter().any(|v| v == cid))
        .collect();
    stale.sort_unstable();
    stale.dedup();
    for cid in &stale {
        s.push_str(&delete_lines(table, v6, cid, Some(&marker)));
    }
    let left = markers.iter().filter(|c| !stale.contains(c)).count();
    if table.has_chain(&marker) && left == 0 {
        s.push_str(&format!("delete chain {f} {TABLE} {marker}\n"));
    }
    s
}

/// GC in both families: one listing each, one transaction.
pub fn gc(network: &str, valid: &[String]) -> Result<(), CniError> {
    let mut script = String::new();
    for v6 in [false, true] {
        if let Some(table) = list(v6)? {
            script.push_str(&gc_lines(network, valid, &table, v6));
        }
    }
    apply(&script, "error deleting stale nftables rules")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_text as parse;
    use cni_fw::nft::parse_table_text;

    fn conf(extra: &str) -> Conf {
        parse(
            format!(
                r#"{{"name":"pmx","runtimeConfig":{{"portMappings":[
                {{"hostPort":8080,"containerPort":80,"protocol":"tcp"}},
                {{"hostPort":8082,"containerPort":82,"protocol":"udp","hostIP":"10.60.99.1"}}]}}{extra}}}"#
            )
            .as_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn rules() {
        let r = container_rules(&conf(""), "10.60.99.2/24".parse().unwrap());
        let texts: Vec<(&str, &str)> = r.iter().map(|r| (r.chain, r.text.as_str())).collect();
        assert_eq!(
            texts,
            vec![
                ("hostports", "tcp dport 8080 dnat to 10.60.99.2:80"),
                (
                    "hostports",
                    "ip daddr 10.60.99.1 udp dport 8082 dnat to 10.60.99.2:82"
                ),
                (
                    "masquerading",
                    "ip saddr 10.60.99.0/24 ip daddr 10.60.99.2 ct status dnat masquerade"
                ),
                (
                    "masquerading",
                    "ip saddr 127.0.0.1 ip daddr 10.60.99.2 masquerade"
                ),
            ]
        );
        let r = container_rules(&conf(r#","masqAll":true"#), "fd60::2/64".parse().unwrap());
        let texts: Vec<&str> = r.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "tcp dport 8080 dnat to [fd60::2]:80",
                "ip6 saddr ::/0 ip6 daddr fd60::2 masquerade"
            ]
        );
        assert_eq!(
            container_rules(&conf(r#","snat":false"#), "fd60::2/64".parse().unwrap()).len(),
            1
        );
    }

    #[test]
    fn scripts() {
        let c = conf(r#","conditionsV4":["ip","saddr","!=","10.9.0.0/16"]"#);
        let s = add_script(&c, "c1", "10.60.99.2/24".parse().unwrap(), None);
        assert!(s.starts_with("add table ip cni_hostport { comment \"CNI portmap plugin\" ; }\n"));
        assert!(s.contains("add rule ip cni_hostport prerouting ip saddr != 10.9.0.0/16 fib daddr type local jump hostports_all\n"));
        assert!(s.contains("add rule ip cni_hostport hostports tcp dport 8080 dnat to 10.60.99.2:80 comment \"c1\"\n"));
        assert!(s.contains(&format!(
            "add rule ip cni_hostport {} return comment \"c1\"\n",
            marker_chain("pmx")
        )));
        assert!(!s.contains("delete"));

        let listed = parse_table_text(&format!(
            "table ip cni_hostport {{ # handle 1\n\tchain hostports {{ # handle 1\n\t\ttcp dport 8080 dnat to 10.60.99.2:80 comment \"c1\" # handle 5\n\t\ttcp dport 9 dnat to 10.60.99.3:9 comment \"c2\" # handle 6\n\t}}\n\tchain prerouting {{ # handle 2\n\t\tfib daddr type local jump hostports_all # handle 3\n\t}}\n\tchain output {{ # handle 7\n\t\tfib daddr type local jump hostports_all # handle 8\n\t}}\n\tchain {m} {{ # handle 9\n\t\treturn comment \"c1\" # handle 10\n\t\treturn comment \"c2\" # handle 11\n\t}}\n}}\n",
            m = marker_chain("pmx")
        ));
        let s = add_script(&c, "c1", "10.60.99.2/24".parse().unwrap(), Some(&listed));
        assert!(s.contains("delete rule ip cni_hostport hostports handle 5\n"));
        assert!(s.contains(&format!(
            "delete rule ip cni_hostport {} handle 10\n",
            marker_chain("pmx")
        )));
        assert!(!s.contains("handle 6"));

        // CHECK: c1 lacks its udp and masquerade rules.
        let e = check_table(&c, "c1", "10.60.99.2/24".parse().unwrap(), &listed).unwrap_err();
        assert!(e.msg.contains("udp dport 8082"), "{}", e.msg);
        let only_tcp = parse(br#"{"name":"pmx","snat":false,"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}}"#).unwrap();
        assert!(check_table(&only_tcp, "c1", "10.60.99.2/24".parse().unwrap(), &listed).is_ok());
        assert!(check_table(&only_tcp, "c2", "10.60.99.2/24".parse().unwrap(), &listed).is_err());

        // GC: keep c2, drop c1; the marker chain stays while c2 is marked.
        let g = gc_lines("pmx", &["c2".into()], &listed, false);
        assert_eq!(
            g,
            format!(
                "delete rule ip cni_hostport hostports handle 5\ndelete rule ip cni_hostport {} handle 10\n",
                marker_chain("pmx")
            )
        );
        let g = gc_lines("pmx", &[], &listed, false);
        assert!(g.ends_with(&format!(
            "delete chain ip cni_hostport {}\n",
            marker_chain("pmx")
        )));
        assert_eq!(gc_lines("other", &[], &listed, false), "");
    }
}
