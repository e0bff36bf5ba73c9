//! IP masquerade for container addresses (`ipMasq` of bridge and ptp).
//!
//! iptables: a chain `CNI-<hash(net+cid)>` in `nat` with an ACCEPT for the
//! container's own subnet and a MASQUERADE for everything but multicast,
//! entered from POSTROUTING by source address; every rule commented
//! `name: "<net>" id: "<cid>"`.
//!
//! nftables: table `inet cni_plugins_masquerade`, base chain `postrouting`
//! going to `masq_checks`, one rule per address commented with a hash of the
//! network and the attachment.
//!
//! With iptables-nft (in every family of the attachment), the iptables
//! setup is one nf_tables transaction over netlink for all families:
//! `NEWCHAIN` of the chain (`NLM_F_EXCL`, as iptables-nft sends it), its
//! rules and the POSTROUTING jumps, encoded as iptables-nft 1.8.9 encodes
//! the same text (`iptables_nft::new_chains_with_rules`; the golden test
//! compares the bytes with a capture of `iptables-restore`), so
//! `iptables-save`, `iptables -C`/`-D` and the reference's DEL read them as
//! their own; chain names are per attachment, so concurrent ADDs never
//! collide. The kernel refuses the whole transaction, and the ADD takes
//! the `iptables-restore --noflush` path of legacy iptables (one
//! transaction per family), when the chain exists already (a repeated or
//! interrupted ADD: `:CHAIN` flushes and refills it), when the `nat` table
//! or its POSTROUTING chain does not exist yet (a node's first ADD:
//! iptables-restore creates them, as iptables-nft creates its built-in
//! chains), or when a rule would be encoded otherwise (a `/0` subnet).
//! The teardown is one nf_tables transaction over netlink too
//! (`iptables::nft_delete_chain`): no `iptables-save` of the whole `nat`
//! table, which grows with every container, and no tool run.
//!
//! Teardown needs no addresses (the names are derived from the attachment),
//! so DEL cleans up even when the container's netns is already gone.

use crate::exec::ToolError;
use crate::hash::{chain_name, comment};
use crate::iptables::{self, Family, XtMatch, XtRule, XtTarget};
use crate::iptables_nft;
use crate::nft;
use cni_skel::CniError;
use cni_skel::teardown::Teardown;
use ipnetwork::{IpNetwork, Ipv4Network, Ipv6Network};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The firewall backend used for masquerading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// iptables / ip6tables, `nat` table.
    Iptables,
    /// nftables, table `inet cni_plugins_masquerade`.
    Nftables,
}

impl Backend {
    /// Parses `ipMasqBackend`; `None` when unset.
    pub fn parse(value: Option<&str>) -> Result<Option<Backend>, CniError> {
        match value {
            None => Ok(None),
            Some("iptables") => Ok(Some(Backend::Iptables)),
            Some("nftables") => Ok(Some(Backend::Nftables)),
            Some(other) => Err(CniError::invalid_config(format!(
                "unknown ipmasq backend {other:?}"
            ))),
        }
    }

    /// The configured backend, else the reference's default: iptables unless
    /// only nftables is available.
    pub fn resolve(configured: Option<Backend>) -> Backend {
        configured.unwrap_or_else(|| {
            if !iptables::usable(Family::V4) && nft::usable() {
                Backend::Nftables
            } else {
                Backend::Iptables
            }
        })
    }

    fn usable(self) -> bool {
        match self {
            Backend::Iptables => iptables::usable(Family::V4) || iptables::usable(Family::V6),
            Backend::Nftables => nft::usable(),
        }
    }
}

/// Whose rules: one container interface on one network.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// Network name.
    pub network: &'a str,
    /// Container interface name.
    pub ifname: &'a str,
    /// Container ID.
    pub container_id: &'a str,
}

mod check;
pub use check::check;

const NFT_TABLE: &str = "cni_plugins_masquerade";
const NFT_CHAIN: &str = "masq_checks";

/// Masquerades traffic from `addrs` to anything outside their subnets.
pub fn setup(backend: Backend, addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    match backend {
        Backend::Iptables => setup_iptables(addrs, att),
        Backend::Nftables => setup_nftables(addrs, att),
    }
}

/// Removes this attachment's masquerade rules from both backends. Errors of
/// a backend that is not installed are ignored; both backends' failures are
/// reported ([`Teardown`]).
pub fn teardown(att: Attachment<'_>) -> Result<(), CniError> {
    both_backends([
        (teardown_iptables(att), || Backend::Iptables.usable()),
        (teardown_nftables(att), || Backend::Nftables.usable()),
    ])
}

/// Removes the masquerade rules of every attachment of `network` that is
/// not in `valid` (container ID, ifname), from both backends.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    both_backends([
        (gc_iptables(network, valid), || Backend::Iptables.usable()),
        (gc_nftables(network, valid), || Backend::Nftables.usable()),
    ])
}

/// A backend's outcome, and whether that backend is installed.
type BackendOutcome = (Result<(), CniError>, fn() -> bool);

/// The backends' outcomes, a failure counted only where its backend is
/// installed (`usable`, asked only then): the reference's rule, since the
/// attachment may have been made by either.
fn both_backends(outcomes: [BackendOutcome; 2]) -> Result<(), CniError> {
    let mut steps = Teardown::default();
    for (outcome, usable) in outcomes {
        if outcome.is_err() && usable() {
            steps.step(outcome);
        }
    }
    steps.finish()
}

fn families(addrs: &[IpNetwork]) -> Vec<Family> {
    let mut out = Vec::new();
    for a in addrs {
        let f = Family::of(&a.ip());
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

fn host_len(ip: std::net::IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// The masked subnet of an address: `10.1.2.7/24` → `10.1.2.0/24`.
fn subnet(addr: &IpNetwork) -> String {
    format!("{}/{}", addr.network(), addr.prefix())
}

fn ipt_err(e: ToolError) -> CniError {
    e.into_cni("iptables")
}

// ---- iptables ----

/// Multicast, which is not masqueraded: `224.0.0.0/4`, `ff00::/8`.
const MULTICAST_V4: Option<Ipv4Network> = Ipv4Network::new_checked(Ipv4Addr::new(224, 0, 0, 0), 4);
const MULTICAST_V6: Option<Ipv6Network> =
    Ipv6Network::new_checked(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8);
const _: () = assert!(MULTICAST_V4.is_some() && MULTICAST_V6.is_some());

/// The rules of `family`'s addresses among `addrs`, described once for
/// both ways of writing them: the chain's (for each address an ACCEPT of
/// its subnet and a MASQUERADE of everything but multicast), then the
/// POSTROUTING jumps to the chain by source address; every rule commented
/// `comment`.
fn iptables_rules(
    family: Family,
    addrs: &[IpNetwork],
    chain: &str,
    comment: &str,
) -> (Vec<XtRule>, Vec<XtRule>) {
    let multicast = match family {
        Family::V4 => MULTICAST_V4.map(IpNetwork::V4),
        Family::V6 => MULTICAST_V6.map(IpNetwork::V6),
    };
    let rule = |chain: &str, source, destination, not_destination, target| XtRule {
        family,
        chain: chain.to_string(),
        source,
        destination,
        not_destination,
        protocol: None,
        matches: vec![XtMatch::Comment(comment.to_string())],
        target: Some(target),
    };
    let mine = addrs.iter().filter(|a| Family::of(&a.ip()) == family);
    let mut masq = Vec::new();
    let mut jumps = Vec::new();
    for a in mine {
        let subnet = IpNetwork::new(a.network(), a.prefix()).ok();
        masq.push(rule(chain, None, subnet, false, XtTarget::Accept));
        masq.push(rule(chain, None, multicast, true, XtTarget::Masquerade));
        let source = Some(IpNetwork::from(a.ip()));
        jumps.push(rule(
            "POSTROUTING",
            source,
            None,
            false,
            XtTarget::Jump(chain.into()),
        ));
    }
    (masq, jumps)
}

fn setup_iptables(addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    let chain = chain_name(att.network, att.container_id);
    let comment = comment(att.network, att.container_id);
    let families = families(addrs);
    let rules: Vec<(Vec<XtRule>, Vec<XtRule>)> = families
        .iter()
        .map(|f| iptables_rules(*f, addrs, &chain, &comment))
        .collect();
    if setup_nft(&families, &chain, &rules) {
        return Ok(());
    }
    for (family, (masq, jumps)) in families.into_iter().zip(&rules) {
        // A new attachment's chain does not exist yet, so no POSTROUTING
        // rule can jump to it: only a repeated ADD needs the table read.
        let table = if iptables::chain_surely_absent(family, "nat", &chain) {
            iptables::Table::default()
        } else {
            iptables::save(family, "nat").map_err(ipt_err)?
        };
        let existing: Vec<&str> = table.rules("POSTROUTING").collect();
        // Declaring the chain creates it, or flushes it if it exists.
        let mut lines = vec![format!(":{chain} - [0:0]")];
        lines.extend(masq.iter().map(|r| format!("-A {chain} {}", r.text())));
        for jump in jumps.iter().map(XtRule::text) {
            if !existing.contains(&jump.as_str()) {
                lines.push(format!("-A POSTROUTING {jump}"));
            }
        }
        iptables::restore(family, "nat", &lines).map_err(ipt_err)?;
    }
    Ok(())
}

/// With iptables-nft in every family: the chain of each family and the
/// rules in one nf_tables transaction over netlink, as iptables-nft 1.8.9
/// encodes them (see the module documentation). False, nothing changed,
/// when the text path must do it: legacy iptables, the chain there already
/// (a repeated ADD: `EEXIST`), no `nat` table or POSTROUTING chain yet
/// (`ENOENT`: iptables-restore creates them), or a rule 1.8.9 would encode
/// otherwise (a `/0` subnet).
fn setup_nft(families: &[Family], chain: &str, rules: &[(Vec<XtRule>, Vec<XtRule>)]) -> bool {
    if !families.iter().all(|f| iptables::is_nft_variant(*f)) {
        return false;
    }
    let chains: Vec<(Family, &str)> = families.iter().map(|f| (*f, chain)).collect();
    let all: Vec<XtRule> = rules
        .iter()
        .flat_map(|(masq, jumps)| masq.iter().chain(jumps))
        .cloned()
        .collect();
    let done = cni_net::NfSocket::open("nf_tables")
        .and_then(|mut s| iptables_nft::new_chains_with_rules(&mut s, "nat", &chains, &all));
    match done {
        Ok(()) => true,
        Err(e) => {
            log::debug!("masquerade rules over netlink: {e}; with iptables-restore");
            false
        }
    }
}

/// Lines deleting `chain` and every POSTROUTING rule that jumps to it.
fn delete_chain_lines(table: &iptables::Table, chain: &str) -> Vec<String> {
    let jump = format!("-j {chain}");
    let mut lines: Vec<String> = table
        .rules("POSTROUTING")
        .filter(|r| r.ends_with(&jump))
        .map(|r| format!("-D POSTROUTING {r}"))
        .collect();
    if table.has_chain(chain) {
        lines.push(format!("-F {chain}"));
        lines.push(format!("-X {chain}"));
    }
    lines
}

fn teardown_iptables(att: Attachment<'_>) -> Result<(), CniError> {
    let chain = chain_name(att.network, att.container_id);
    for family in [Family::V4, Family::V6] {
        if !iptables::usable(family)
            || iptables::nft_delete_chain(family, "nat", &chain, "POSTROUTING")
        {
            continue;
        }
        let table = iptables::save(family, "nat").map_err(ipt_err)?;
        iptables::restore(family, "nat", &delete_chain_lines(&table, &chain)).map_err(ipt_err)?;
    }
    Ok(())
}

/// The container ID in a rule commented `name: "<network>" id: "<cid>"`.
fn comment_container_id<'a>(rule: &'a str, network: &str) -> Option<&'a str> {
    let prefix = format!("--comment \"name: \\\"{network}\\\" id: \\\"");
    let start = rule.find(&prefix)? + prefix.len();
    let rest = rule.get(start..)?;
    let end = rest.find("\\\"")?;
    rest.get(..end)
}

fn gc_iptables(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    for family in [Family::V4, Family::V6] {
        if !iptables::usable(family) {
            continue;
        }
        let table = iptables::save(family, "nat").map_err(ipt_err)?;
        // The iptables rules ignore ifname: a container ID valid on any
        // interface keeps its chain.
        let mut stale: Vec<String> = table
            .rules("POSTROUTING")
            .filter_map(|r| comment_container_id(r, network))
            .filter(|cid| !valid.iter().any(|(v, _)| v == cid))
            .map(|cid| chain_name(network, cid))
            .collect();
        stale.sort();
        stale.dedup();
        let lines: Vec<String> = stale
            .iter()
            .flat_map(|c| delete_chain_lines(&table, c))
            .collect();
        iptables::restore(family, "nat", &lines).map_err(ipt_err)?;
    }
    Ok(())
}

// ---- nftables ----

fn instance_hash(att: Attachment<'_>) -> String {
    crate::hash::attachment_key(att.network, att.ifname, att.container_id)
}

/// The rule comment: the instance hash, then a readable description, at
/// most 128 bytes (nftables' limit).
fn instance_comment(att: Attachment<'_>) -> String {
    let strip = |s: &str| s.replace('"', "");
    let mut c = format!(
        "{}, net: {}, if: {}, id: {}",
        instance_hash(att),
        strip(att.network),
        strip(att.ifname),
        strip(att.container_id)
    );
    // Names are ASCII (validated by the skel), so byte truncation is safe;
    // guard anyway.
    while c.len() > 128 {
        c.pop();
    }
    c
}

fn nft_err(e: ToolError) -> CniError {
    e.into_cni("nftables")
}

fn delete_rule_lines(rules: &[nft::Rule], keep: impl Fn(&nft::Rule) -> bool) -> String {
    rules
        .iter()
        .filter(|r| r.chain == NFT_CHAIN && !keep(r))
        .map(|r| {
            format!(
                "delete rule inet {NFT_TABLE} {NFT_CHAIN} handle {}\n",
                r.handle
            )
        })
        .collect()
}

fn setup_nftables(addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    let rules = nft::list_rules("inet", NFT_TABLE).map_err(nft_err)?;
    let prefix = instance_hash(att);
    let t = NFT_TABLE;
    let mut script = format!(
        "add table inet {t} {{ comment \"Masquerading for plugins from github.com/containernetworking/plugins\" ; }}\n\
         add chain inet {t} {NFT_CHAIN} {{ comment \"Masquerade traffic from certain IPs to any (non-multicast) IP outside their subnet\" ; }}\n\
         add chain inet {t} postrouting {{ type nat hook postrouting priority srcnat ; }}\n\
         flush chain inet {t} postrouting\n\
         add rule inet {t} postrouting ip daddr == 224.0.0.0/4  return\n\
         add rule inet {t} postrouting ip6 daddr == ff00::/8  return\n\
         add rule inet {t} postrouting goto {NFT_CHAIN}\n"
    );
    script.push_str(&delete_rule_lines(&rules, |r| {
        !r.comment.starts_with(&prefix)
    }));
    let quoted = nft::quote(&instance_comment(att));
    for a in addrs {
        let ip = if a.is_ipv4() { "ip" } else { "ip6" };
        script.push_str(&format!(
            "add rule inet {t} {NFT_CHAIN} {ip} saddr == {} {ip} daddr != {} masquerade comment {quoted}\n",
            a.ip(),
            subnet(a)
        ));
    }
    nft::apply(&script).map_err(nft_err)
}

/// True when the kernel says our nftables chain does not exist (a netlink
/// query instead of an `nft` run): there is then nothing to remove.
fn nft_chain_surely_absent() -> bool {
    matches!(
        crate::nf_tables::chain_exists(crate::nf_tables::NfFamily::Inet, NFT_TABLE, NFT_CHAIN),
        Ok(false)
    )
}

fn teardown_nftables(att: Attachment<'_>) -> Result<(), CniError> {
    if nft_chain_surely_absent() {
        return Ok(());
    }
    let rules = nft::list_rules("inet", NFT_TABLE).map_err(nft_err)?;
    let prefix = instance_hash(att);
    nft::apply(&delete_rule_lines(&rules, |r| {
        !r.comment.starts_with(&prefix)
    }))
    .map_err(nft_err)
}

fn gc_nftables(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    if nft_chain_surely_absent() {
        return Ok(());
    }
    let rules = nft::list_rules("inet", NFT_TABLE).map_err(nft_err)?;
    let net_prefix = crate::hash::network_key_prefix(network);
    let keep: Vec<String> = valid
        .iter()
        .map(|(cid, ifname)| {
            instance_comment(Attachment {
                network,
                ifname,
                container_id: cid,
            })
        })
        .collect();
    let script = delete_rule_lines(&rules, |r| {
        !r.comment.starts_with(&net_prefix) || keep.contains(&r.comment)
    });
    nft::apply(&script).map_err(nft_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_failures_are_reported_where_installed() {
        let fail = |m: &str| Err(CniError::internal(m));
        assert_eq!(
            both_backends([(Ok(()), || true), (Ok(()), || true)]),
            Ok(())
        );
        let e = both_backends([
            (fail("iptables: a"), || true),
            (fail("nftables: b"), || true),
        ])
        .unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (999, "iptables: a; nftables: b", "")
        );
        // A backend that is not installed fails without counting.
        assert_eq!(
            both_backends([(fail("iptables: a"), || false), (Ok(()), || true)]),
            Ok(())
        );
        assert_eq!(
            both_backends([
                (fail("iptables: a"), || false),
                (fail("nftables: b"), || true)
            ]),
            Err(CniError::internal("nftables: b"))
        );
    }

    /// The rules [`setup`] writes are the ones whose bytes
    /// `iptables_nft`'s golden test compares with iptables-nft 1.8.9's.
    #[test]
    fn nm_rules_are_the_captured_ones() {
        use crate::iptables_nft::tests::{MASQ_CHAIN, masq_rules};
        let addrs: Vec<IpNetwork> = ["10.181.0.2/24", "fd00:181::2/64"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        for family in [Family::V4, Family::V6] {
            let (masq, jumps) = iptables_rules(family, &addrs, MASQ_CHAIN, r#"name: "n" id: "c""#);
            let all: Vec<XtRule> = masq.into_iter().chain(jumps).collect();
            assert_eq!(all, masq_rules(family), "{family:?}");
        }
    }

    #[test]
    fn backend_names() {
        assert_eq!(
            Backend::parse(Some("nftables")).unwrap(),
            Some(Backend::Nftables)
        );
        assert_eq!(Backend::parse(None).unwrap(), None);
        assert_eq!(
            Backend::parse(Some("pf")).unwrap_err().msg,
            "unknown ipmasq backend \"pf\""
        );
    }

    #[test]
    fn comments_and_hashes() {
        let att = Attachment {
            network: "net1",
            ifname: "eth0",
            container_id: "c1",
        };
        let c = instance_comment(att);
        assert!(c.starts_with(&instance_hash(att)));
        assert!(c.ends_with(", net: net1, if: eth0, id: c1"));
        assert_eq!(instance_hash(att).len(), 33);
        let long = "x".repeat(200);
        let c = instance_comment(Attachment {
            network: "n",
            ifname: "eth0",
            container_id: &long,
        });
        assert_eq!(c.len(), 128);
    }

    #[test]
    fn finds_container_id_in_comment() {
        let rule = r#"-s 10.0.0.2/32 -m comment --comment "name: \"net1\" id: \"abc\"" -j CNI-x"#;
        assert_eq!(comment_container_id(rule, "net1"), Some("abc"));
        assert_eq!(comment_container_id(rule, "net2"), None);
    }

    #[test]
    fn delete_lines_cover_postrouting_and_chain() {
        let t = iptables::Table::from_text(
            ":POSTROUTING ACCEPT [0:0]\n:CNI-a - [0:0]\n-A POSTROUTING -s 10.0.0.2/32 -j CNI-a\n-A POSTROUTING -s 10.0.0.2/24 -j CNI-a\n-A POSTROUTING -s 10.0.0.3/32 -j CNI-b\n",
        );
        assert_eq!(
            delete_chain_lines(&t, "CNI-a"),
            vec![
                "-D POSTROUTING -s 10.0.0.2/32 -j CNI-a",
                "-D POSTROUTING -s 10.0.0.2/24 -j CNI-a",
                "-F CNI-a",
                "-X CNI-a"
            ]
        );
        assert!(delete_chain_lines(&t, "CNI-zz").is_empty());
    }
}
