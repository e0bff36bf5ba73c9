//! The iptables backend, table `filter`, both families. The rules are the
//! reference's, in the form `iptables-save` prints them, so that Go's
//! plugin and this one find and delete each other's rules:
//!
//! ```text
//! FORWARD (first):  -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
//! CNI-FORWARD:      -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
//!                   -d 10.1.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
//!                   -s 10.1.0.2/32 -j ACCEPT
//! ```
//!
//! The per-address rules carry nothing that says whose they are, and must
//! not (Go deletes them by their exact text). So that DEL without a
//! `prevResult` and GC can find a container's addresses, ADD also writes,
//! in the same transaction, one record per address into the chain
//! `CNI-FW-ATTACHMENTS`, which nothing jumps to (it never sees a packet):
//!
//! ```text
//! CNI-FW-ATTACHMENTS: -s 10.1.0.2/32 -m comment --comment "<attachment key> name: net id: cid if: eth0"
//! ```
//!
//! With `ingressPolicy` `same-bridge` or `isolated`, the isolation chains of
//! the reference v1.9.1 (see [`isolate`]).
//!
//! The per-address rules and records are [`XtRule`] values, each rendered
//! as text ([`XtRule::text`]) and as netlink from the one description. The
//! shared jumps and the isolation rules stay text (`forward_jump`,
//! `admin_jump`, [`isolate`]). Only `iptables-restore` writes them: they
//! are inserted at the top (`-I`), which the netlink ADD never does, and
//! ADD recognises them over netlink by target, interfaces and comment. As
//! `XtRule`s they would need `-i`/`! -o` matches and jump, `DROP` and
//! `RETURN` targets with a text rendering only: a netlink encoding of them
//! would be sent by nothing and held by no golden test. That was tried
//! (one constructor per rule in place of the format strings, the same
//! text, `XtRule` given `-i`/`-o` and a target): it wrote no rule
//! differently, and ADD with `same-bridge` ran 6.8% more instructions
//! (each rule's text built from its value, its comment quoted again each
//! time, where the format strings quote each comment once per call).
//!
//! With iptables' nf_tables variant (Debian's default), the common ADD (the
//! chains and jumps already there) and DEL run no tool: ADD reads the
//! chains over netlink and appends the per-address rules of both families
//! in one nf_tables transaction, encoded as iptables-nft encodes them
//! (`cni_fw::iptables_nft`), so `iptables-save` and the Go plugin see the
//! same rules; DEL deletes by kernel handle. The first ADD on a node (the
//! chains to create), isolation changes, GC, legacy iptables and any
//! netlink failure take the text path: one `iptables-save -t filter` read
//! (none on a node without our chains) and one `iptables-restore
//! --noflush` transaction per family. All under a host-wide lock.

use crate::config::{Conf, IngressPolicy};
use cni_fw::iptables::{self, Edit, Family, Table, XtMatch, XtRule, XtTarget, quote};
use cni_skel::CniError;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// The chain holding the per-address rules.
pub const FORWARD_CHAIN: &str = "CNI-FORWARD";
/// rcni's records of which attachment each address belongs to.
pub const RECORDS_CHAIN: &str = "CNI-FW-ATTACHMENTS";
/// Isolation, first stage: traffic leaving a bridge for elsewhere.
pub const STAGE1_CHAIN: &str = "CNI-ISOLATION-STAGE-1";
/// Isolation, second stage: drops it when it enters another bridge.
pub const STAGE2_CHAIN: &str = "CNI-ISOLATION-STAGE-2";
const TABLE: &str = "filter";

/// Identifies one attachment: network, container, interface.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// Network name.
    pub network: &'a str,
    /// Container ID.
    pub container_id: &'a str,
    /// Container interface name.
    pub ifname: &'a str,
}

impl Attachment<'_> {
    /// The attachment key (network hash, then the attachment's).
    pub fn key(&self) -> String {
        cni_fw::hash::attachment_key(self.network, self.ifname, self.container_id)
    }

    /// The record comment: the key, then who it is in readable form (cut to
    /// iptables' 255 characters; only the key is ever parsed back).
    fn record_comment(&self) -> String {
        let readable = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "_.-@".contains(c) {
                        c
                    } else {
                        '?'
                    }
                })
                .collect()
        };
        let mut c = format!(
            "{} name: {} id: {} if: {}",
            self.key(),
            readable(self.network),
            readable(self.container_id),
            readable(self.ifname)
        );
        c.truncate(255);
        c
    }
}

fn forward_jump() -> String {
    format!(
        "-m comment --comment {} -j {FORWARD_CHAIN}",
        quote("CNI firewall plugin rules")
    )
}

fn admin_jump(admin: &str) -> String {
    format!(
        "-m comment --comment {} -j {admin}",
        quote("CNI firewall plugin admin overrides")
    )
}

/// The two rules that let `ip`'s traffic out and its replies back in,
/// described once: [`XtRule::text`] renders each as `iptables-save` prints
/// it (for `iptables-restore` and for comparing with a saved table), and
/// `iptables::nft_append` as iptables-nft's netlink expressions.
fn address_rules(ip: IpAddr) -> [XtRule; 2] {
    let rule = |source: Option<IpAddr>, destination: Option<IpAddr>, matches| XtRule {
        family: Family::of(&ip),
        chain: FORWARD_CHAIN.to_string(),
        source: source.map(IpNetwork::from),
        destination: destination.map(IpNetwork::from),
        not_destination: false,
        protocol: None,
        matches,
        target: Some(XtTarget::Accept),
    };
    let related_established = XtMatch::CtState(iptables::CT_RELATED | iptables::CT_ESTABLISHED);
    [
        rule(None, Some(ip), vec![related_established]),
        rule(Some(ip), None, vec![]),
    ]
}

/// The record of `ip` for `att` (see the module documentation), described
/// once as [`address_rules`] are.
fn record_rule(ip: IpAddr, att: &Attachment<'_>) -> XtRule {
    XtRule {
        family: Family::of(&ip),
        chain: RECORDS_CHAIN.to_string(),
        source: Some(ip.into()),
        destination: None,
        not_destination: false,
        protocol: None,
        matches: vec![XtMatch::Comment(att.record_comment())],
        target: None,
    }
}

/// One record read back: its whole rule text, address and attachment key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record<'t> {
    rule: &'t str,
    ip: IpAddr,
    key: &'t str,
}

/// The key is 33 characters: `<16 hex>-<16 hex>`.
const KEY_LEN: usize = 33;

fn records(table: &Table) -> Vec<Record<'_>> {
    table
        .rules(RECORDS_CHAIN)
        .filter_map(|rule| {
            let addr = rule.strip_prefix("-s ")?.split(' ').next()?;
            let ip: IpAddr = addr.split('/').next()?.parse().ok()?;
            let start = rule.find("--comment \"")? + "--comment \"".len();
            let key = rule.get(start..start + KEY_LEN)?;
            Some(Record { rule, ip, key })
        })
        .collect()
}

/// Message text for a missing rule, as the reference prints its rule
/// arguments (`[-s 10.1.0.2/32 -j ACCEPT]`).
fn shown(rule: &str) -> String {
    format!("[{}]", rule.replace('"', ""))
}

fn ipt_err(e: cni_fw::exec::ToolError) -> CniError {
    e.into_cni("iptables")
}

fn family_name(f: Family) -> &'static str {
    match f {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    }
}

/// The families of `ips`, IPv4 first.
pub fn families(ips: &[IpAddr]) -> Vec<Family> {
    [Family::V4, Family::V6]
        .into_iter()
        .filter(|f| ips.iter().any(|ip| Family::of(ip) == *f))
        .collect()
}

/// Fails when the tools of a family that has addresses are missing (only
/// those: a node without ip6tables can still serve IPv4 containers).
pub fn require_tools(ips: &[IpAddr]) -> Result<(), CniError> {
    for f in families(ips) {
        if !iptables::usable(f) {
            return Err(CniError::internal(format!(
                "could not initialize iptables protocol {}: {}-save/-restore not found",
                family_name(f),
                if f == Family::V4 {
                    "iptables"
                } else {
                    "ip6tables"
                }
            )));
        }
    }
    Ok(())
}

/// The isolation rules of `ingressPolicy` for `bridge`, as v1.9.1 writes
/// them (C = the shared comment, P = the policy's):
///
/// ```text
/// FORWARD (first):        -m comment --comment C -j CNI-ISOLATION-STAGE-1
/// STAGE-1 (first):        -i BR ! -o BR -m comment --comment P -j CNI-ISOLATION-STAGE-2
///   isolated (first):     -i BR -o BR -m comment --comment P -j DROP
/// STAGE-1 (last):         -m comment --comment C -j RETURN
/// STAGE-2 (first):        -o BR -m comment --comment C -j DROP
/// STAGE-2 (last):         -m comment --comment C -j RETURN
/// ```
///
/// v1.1.1 wrote C as `… (ingressPolicy: same-bridge)`: those rules are
/// replaced by v1.9.1's (for every bridge found), so that an upgraded node
/// does not keep both sets.
pub fn isolate(edit: &mut Edit<'_>, bridge: &str, policy: IngressPolicy) {
    let shared = quote("CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)");
    let own = quote(&format!(
        "CNI firewall plugin rules (ingressPolicy: {})",
        policy.name()
    ));
    let old = quote("CNI firewall plugin rules (ingressPolicy: same-bridge)");
    edit.ensure_chain(STAGE1_CHAIN);
    edit.ensure_chain(STAGE2_CHAIN);

    // v1.1.1's variants of the shared rules.
    edit.delete_all(
        "FORWARD",
        &format!("-m comment --comment {old} -j {STAGE1_CHAIN}"),
    );
    for chain in [STAGE1_CHAIN, STAGE2_CHAIN] {
        edit.delete_all(chain, &format!("-m comment --comment {old} -j RETURN"));
    }
    let old_drop_suffix = format!(" -m comment --comment {old} -j DROP");
    let old_drops: Vec<String> = edit
        .table()
        .rules(STAGE2_CHAIN)
        .filter_map(|r| {
            let br = r
                .strip_prefix("-o ")?
                .strip_suffix(old_drop_suffix.as_str())?;
            (!br.contains(' ')).then(|| br.to_string())
        })
        .collect();
    for br in &old_drops {
        edit.delete_all(
            STAGE2_CHAIN,
            &format!("-o {br} -m comment --comment {old} -j DROP"),
        );
        edit.insert_unique(
            STAGE2_CHAIN,
            &format!("-o {br} -m comment --comment {shared} -j DROP"),
        );
    }

    edit.insert_unique(
        "FORWARD",
        &format!("-m comment --comment {shared} -j {STAGE1_CHAIN}"),
    );
    edit.insert_unique(
        STAGE1_CHAIN,
        &format!("-i {bridge} ! -o {bridge} -m comment --comment {own} -j {STAGE2_CHAIN}"),
    );
    if policy == IngressPolicy::Isolated {
        edit.insert_unique(
            STAGE1_CHAIN,
            &format!("-i {bridge} -o {bridge} -m comment --comment {own} -j DROP"),
        );
    }
    edit.append_unique(
        STAGE1_CHAIN,
        &format!("-m comment --comment {shared} -j RETURN"),
    );
    edit.insert_unique(
        STAGE2_CHAIN,
        &format!("-o {bridge} -m comment --comment {shared} -j DROP"),
    );
    edit.append_unique(
        STAGE2_CHAIN,
        &format!("-m comment --comment {shared} -j RETURN"),
    );
}

/// The isolation rules CHECK expects for `bridge`, each with its v1.1.1
/// spelling as an equally good alternative (the rules match the same
/// packets; a node whose rules Go v1.1.1 wrote passes).
fn isolation_rules(bridge: &str, policy: IngressPolicy) -> Vec<(&'static str, [String; 2])> {
    let shared = quote("CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)");
    let old = quote("CNI firewall plugin rules (ingressPolicy: same-bridge)");
    let own = quote(&format!(
        "CNI firewall plugin rules (ingressPolicy: {})",
        policy.name()
    ));
    let both = |f: &dyn Fn(&str) -> String| [f(&shared), f(&old)];
    let mut out = vec![
        (
            "FORWARD",
            both(&|c| format!("-m comment --comment {c} -j {STAGE1_CHAIN}")),
        ),
        (
            STAGE1_CHAIN,
            both(&|_| {
                format!("-i {bridge} ! -o {bridge} -m comment --comment {own} -j {STAGE2_CHAIN}")
            }),
        ),
        (
            STAGE2_CHAIN,
            both(&|c| format!("-o {bridge} -m comment --comment {c} -j DROP")),
        ),
    ];
    if policy == IngressPolicy::Isolated {
        out.push((
            STAGE1_CHAIN,
            both(&|_| format!("-i {bridge} -o {bridge} -m comment --comment {own} -j DROP")),
        ));
    }
    out
}

/// The chains whose absence means the table holds nothing of ours.
fn our_chains(conf: &Conf) -> [&str; 5] {
    [
        FORWARD_CHAIN,
        RECORDS_CHAIN,
        STAGE1_CHAIN,
        STAGE2_CHAIN,
        conf.admin_chain.as_str(),
    ]
}

/// What ADD writes into one family's table: the chains and jumps, the
/// address rules and records of `ips` (all of this family), and the
/// isolation rules when `bridge` is given.
pub fn add_lines(
    table: &Table,
    conf: &Conf,
    att: &Attachment<'_>,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
) -> Vec<String> {
    let mut edit = Edit::new(table);
    edit.ensure_chain(FORWARD_CHAIN);
    edit.ensure_chain(&conf.admin_chain);
    edit.ensure_chain(RECORDS_CHAIN);
    edit.insert_unique("FORWARD", &forward_jump());
    edit.insert_unique(FORWARD_CHAIN, &admin_jump(&conf.admin_chain));
    for ip in ips {
        for rule in address_rules(*ip) {
            edit.append_unique(FORWARD_CHAIN, &rule.text());
        }
        edit.append_unique(RECORDS_CHAIN, &record_rule(*ip, att).text());
    }
    if let Some((bridge, policy)) = isolation {
        isolate(&mut edit, bridge, policy);
    }
    edit.lines().to_vec()
}

/// What ADD needs to know of one family's table, read over netlink instead
/// of with `iptables-save` (nf_tables iptables only), as a table holding
/// just that: which of the plugin's chains exist, and whether the two
/// shared jumps are there. `None` (read the table with `iptables-save`)
/// unless it is certain that no rule or record of `ips` exists yet, which
/// is the case of a new container.
fn known_state(
    family: Family,
    conf: &Conf,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
) -> Option<Table> {
    let octets = |ip: &IpAddr| -> Vec<u8> {
        match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    };
    let mentions = |rules: &[iptables::RuleSummary]| {
        rules
            .iter()
            .any(|r| ips.iter().any(|ip| r.values.contains(&octets(ip))))
    };
    let forward = iptables::nft_rules(family, TABLE, FORWARD_CHAIN)?;
    let records = iptables::nft_rules(family, TABLE, RECORDS_CHAIN)?;
    if mentions(&forward) || mentions(&records) {
        return None;
    }
    let top = iptables::nft_rules(family, TABLE, "FORWARD")?;
    let jumps_with = |rules: &[iptables::RuleSummary], to: &str, comment: &str| {
        rules
            .iter()
            .any(|r| r.jumps == [to] && iptables::xt_comment(r).as_deref() == Some(comment))
    };
    let mut text = String::new();
    for chain in [FORWARD_CHAIN, RECORDS_CHAIN, conf.admin_chain.as_str()] {
        if iptables::nft_chain_exists(family, TABLE, chain)? {
            text.push_str(&format!(":{chain} - [0:0]\n"));
        }
    }
    if jumps_with(&top, FORWARD_CHAIN, "CNI firewall plugin rules") {
        text.push_str(&format!("-A FORWARD {}\n", forward_jump()));
    }
    if jumps_with(
        &forward,
        &conf.admin_chain,
        "CNI firewall plugin admin overrides",
    ) {
        text.push_str(&format!(
            "-A {FORWARD_CHAIN} {}\n",
            admin_jump(&conf.admin_chain)
        ));
    }
    if let Some((bridge, _)) = isolation {
        text.push_str(&known_isolation(family, &top, bridge)?);
    }
    Some(Table::from_text(text))
}

/// The isolation rules that [`isolate`] looks for, as read over netlink
/// (`-i`/`-o` match on the name padded with NULs): the jump from FORWARD,
/// this bridge's rules and the RETURNs. `None` when a v1.1.1 spelling is
/// there (the full path replaces it) or a rule is not understood.
fn known_isolation(family: Family, top: &[iptables::RuleSummary], bridge: &str) -> Option<String> {
    let shared = "CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)";
    let old = "CNI firewall plugin rules (ingressPolicy: same-bridge)";
    let is_bridge = |v: &Vec<u8>| {
        v.len() > bridge.len()
            && v.starts_with(bridge.as_bytes())
            && v[bridge.len()..].iter().all(|b| *b == 0)
    };
    let mut text = String::new();
    for chain in [STAGE1_CHAIN, STAGE2_CHAIN] {
        if iptables::nft_chain_exists(family, TABLE, chain)? {
            text.push_str(&format!(":{chain} - [0:0]\n"));
        }
    }
    for r in top.iter().filter(|r| r.jumps == [STAGE1_CHAIN]) {
        if iptables::xt_comment(r)? != shared {
            return None;
        }
        text.push_str(&format!(
            "-A FORWARD -m comment --comment {} -j {STAGE1_CHAIN}\n",
            quote(shared)
        ));
    }
    let stage1 = iptables::nft_rules(family, TABLE, STAGE1_CHAIN)?;
    let stage2 = iptables::nft_rules(family, TABLE, STAGE2_CHAIN)?;
    let all = stage1
        .iter()
        .map(|r| (STAGE1_CHAIN, r))
        .chain(stage2.iter().map(|r| (STAGE2_CHAIN, r)));
    for (chain, r) in all {
        let comment = iptables::xt_comment(r)?;
        let q = quote(&comment);
        let mine = !r.values.is_empty() && r.values.iter().all(is_bridge);
        let line = match (chain, r.jumps.as_slice(), r.values.len()) {
            // The RETURN at the end of each chain.
            (_, [], 0) if comment == shared => format!("-m comment --comment {q} -j RETURN"),
            (_, [], 0) if comment == old => return None,
            (STAGE1_CHAIN, [to], 2) if to == STAGE2_CHAIN && mine => {
                format!("-i {bridge} ! -o {bridge} -m comment --comment {q} -j {STAGE2_CHAIN}")
            }
            (STAGE1_CHAIN, [], 2) if mine => {
                format!("-i {bridge} -o {bridge} -m comment --comment {q} -j DROP")
            }
            (STAGE2_CHAIN, [], 1) if mine && comment == shared => {
                format!("-o {bridge} -m comment --comment {q} -j DROP")
            }
            (STAGE2_CHAIN, [], 1) if comment == old => return None,
            // Another bridge's rules: nothing ADD looks for.
            _ => continue,
        };
        text.push_str(&format!("-A {chain} {line}\n"));
    }
    Some(text)
}

/// The rules ADD appends for `ips` (all of `family`) when the chains and
/// jumps exist, in order: what [`add_lines`] writes then, and what
/// [`iptables::nft_append`] sends.
fn appended_rules(family: Family, att: &Attachment<'_>, ips: &[IpAddr]) -> Vec<XtRule> {
    ips.iter()
        .filter(|ip| Family::of(ip) == family)
        .flat_map(|ip| {
            let [tracked, plain] = address_rules(*ip);
            [tracked, plain, record_rule(*ip, att)]
        })
        .collect()
}

/// ADD. Where the plugin's chains and jumps already exist (every ADD but a
/// node's first) and iptables is the nf_tables variant, the per-address
/// rules of both families are appended over netlink in one transaction,
/// encoded as iptables-nft encodes them: no tool runs. Otherwise, or when
/// that fails, one `iptables-restore` transaction per family.
///
/// The families are separate transactions, so a failure in one can come
/// after the other was written: that one is then undone with DEL's code
/// (this attachment's records and the rules of its addresses, in the
/// families this ADD recorded it in), and the first error is returned. The
/// chains, jumps and isolation rules stay, as after a DEL: they are shared.
pub fn add(
    conf: &Conf,
    att: &Attachment<'_>,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
) -> Result<(), CniError> {
    let mut recorded: Vec<Family> = Vec::new();
    let Err(e) = add_families(conf, att, ips, isolation, &mut recorded) else {
        return Ok(());
    };
    if !recorded.is_empty()
        && let Err(undo) = remove(att, ips, &recorded)
    {
        log::warn!("undoing the failed ADD in {recorded:?}: {}", undo.msg);
    }
    Err(e)
}

/// [`add`] without the undo: pushes onto `recorded` each family in which
/// it wrote this attachment's records (a repeated ADD, whose records were
/// there already, pushes none: what it finds is not its to undo).
fn add_families(
    conf: &Conf,
    att: &Attachment<'_>,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
    recorded: &mut Vec<Family>,
) -> Result<(), CniError> {
    let of_family = |family: Family| -> Vec<IpAddr> {
        ips.iter()
            .copied()
            .filter(|ip| Family::of(ip) == family)
            .collect()
    };
    // Families done by text, with the table read over netlink if it was.
    let mut by_tool: Vec<(Family, Option<Table>)> = Vec::new();
    let mut appends: Vec<(Family, XtRule)> = Vec::new();
    for family in families(ips) {
        let mine = of_family(family);
        let Some(table) = known_state(family, conf, &mine, isolation) else {
            by_tool.push((family, None));
            continue;
        };
        let lines = add_lines(&table, conf, att, &mine, isolation);
        let rules = appended_rules(family, att, &mine);
        let appended = rules.iter().map(|r| format!("-A {} {}", r.chain, r.text()));
        if appended.eq(lines.iter().cloned()) {
            appends.extend(rules.into_iter().map(|r| (family, r)));
        } else {
            by_tool.push((family, Some(table)));
        }
    }
    let appended: Vec<Family> = families(ips)
        .into_iter()
        .filter(|f| appends.iter().any(|(af, _)| af == f))
        .collect();
    if !appends.is_empty() {
        let rules: Vec<XtRule> = appends.iter().map(|(_, r)| r.clone()).collect();
        if iptables::nft_append(TABLE, &rules) {
            // known_state made sure none of these records existed.
            recorded.extend(&appended);
        } else {
            // Nothing was added: those families by text, read afresh.
            by_tool.extend(appended.iter().map(|f| (*f, None)));
        }
    }
    let record_line = format!("-A {RECORDS_CHAIN} ");
    for (family, table) in by_tool {
        let table = match table {
            Some(t) => t,
            None => {
                iptables::save_unless_absent(family, TABLE, &our_chains(conf)).map_err(ipt_err)?
            }
        };
        let lines = add_lines(&table, conf, att, &of_family(family), isolation);
        iptables::restore(family, TABLE, &lines).map_err(ipt_err)?;
        if lines.iter().any(|l| l.starts_with(&record_line)) {
            recorded.push(family);
        }
    }
    Ok(())
}

/// ADD for the firewalld backend: only the isolation rules, in the
/// families of `ips`.
pub fn isolate_only(ips: &[IpAddr], bridge: &str, policy: IngressPolicy) -> Result<(), CniError> {
    for family in families(ips) {
        let table = iptables::save_unless_absent(family, TABLE, &[STAGE1_CHAIN, STAGE2_CHAIN])
            .map_err(ipt_err)?;
        let mut edit = Edit::new(&table);
        isolate(&mut edit, bridge, policy);
        edit.apply(family, TABLE).map_err(ipt_err)?;
    }
    Ok(())
}

/// CHECK of the isolation rules alone (firewalld backend).
pub fn check_isolation(
    ips: &[IpAddr],
    bridge: &str,
    policy: IngressPolicy,
) -> Result<(), CniError> {
    for family in families(ips) {
        let table = iptables::save(family, TABLE).map_err(ipt_err)?;
        check_isolation_table(&table, bridge, policy)?;
    }
    Ok(())
}

fn check_isolation_table(
    table: &Table,
    bridge: &str,
    policy: IngressPolicy,
) -> Result<(), CniError> {
    for (chain, [rule, old]) in isolation_rules(bridge, policy) {
        if !table.rules(chain).any(|r| r == rule || r == old) {
            return Err(CniError::internal(format!(
                "expected {chain} rule {} not found",
                shown(&rule)
            )));
        }
    }
    Ok(())
}

/// Lines removing the address rules and records of attachments: `doomed`
/// says which records go; the address rules of their addresses go too,
/// unless a record that stays claims the same address (two networks with
/// overlapping subnets), plus the rules of `extra_ips` under the same
/// condition (the addresses a `prevResult` names, recorded or not).
fn removal_lines(
    table: &Table,
    doomed: impl Fn(&str) -> bool,
    extra_ips: &[IpAddr],
) -> Vec<String> {
    let recs = records(table);
    let kept: Vec<IpAddr> = recs
        .iter()
        .filter(|r| !doomed(r.key))
        .map(|r| r.ip)
        .collect();
    let mut ips: Vec<IpAddr> = extra_ips.to_vec();
    let mut edit = Edit::new(table);
    for r in recs.iter().filter(|r| doomed(r.key)) {
        edit.delete_all(RECORDS_CHAIN, r.rule);
        if !ips.contains(&r.ip) {
            ips.push(r.ip);
        }
    }
    for ip in ips.iter().filter(|ip| !kept.contains(ip)) {
        for rule in address_rules(*ip) {
            edit.delete_all(FORWARD_CHAIN, &rule.text());
        }
    }
    edit.lines().to_vec()
}

/// DEL: the rules of the addresses in `prev_ips` (from `prevResult`, if
/// any) and of the addresses recorded for this attachment, in every family
/// where there can be any. Rules already gone are not an error.
pub fn del(att: &Attachment<'_>, prev_ips: &[IpAddr]) -> Result<(), CniError> {
    let families: Vec<Family> = [Family::V4, Family::V6]
        .into_iter()
        .filter(|f| iptables::usable(*f))
        .collect();
    remove(att, prev_ips, &families)
}

/// DEL over netlink alone, for a DEL holding the firewall lock shared
/// (issue 30's DEL storm): this attachment's records and the rules of its
/// addresses in every usable family, deleted by kernel handle in one
/// transaction. Such DELs commute with each other unless two attachments
/// claim one address (two networks with overlapping subnets: which of them
/// deletes its rules depends on the other's record), so any address
/// claimed by another attachment's record sends the DEL to the exclusive
/// lock, as do legacy iptables and a rule not recognised. True when done
/// (or nothing of it was there); false, with nothing changed, for [`del`]
/// under the exclusive lock.
pub fn del_shared(att: &Attachment<'_>, prev_ips: &[IpAddr]) -> bool {
    let key = att.key();
    let mut doomed: Vec<(Family, &str, u64)> = Vec::new();
    for family in [Family::V4, Family::V6] {
        if !iptables::usable(family) {
            continue;
        }
        let prev: Vec<IpAddr> = prev_ips
            .iter()
            .copied()
            .filter(|ip| Family::of(ip) == family)
            .collect();
        match doomed_by_handle(family, &key, &prev, Claims::Refused) {
            Some(rules) => doomed.extend(rules.into_iter().map(|(c, h)| (family, c, h))),
            None => return false,
        }
    }
    doomed.is_empty() || iptables::nft_delete(TABLE, &doomed)
}

/// What [`doomed_by_handle`] does with an address that another
/// attachment's record claims.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claims {
    /// Its rules stay (the exclusive lock is held).
    Kept,
    /// The answer is `None` ([`del_shared`]).
    Refused,
}

/// DEL's work in `families` only (DEL: every usable one; a failed ADD:
/// those it wrote).
fn remove(att: &Attachment<'_>, prev_ips: &[IpAddr], families: &[Family]) -> Result<(), CniError> {
    let key = att.key();
    let of_family = |family: Family| -> Vec<IpAddr> {
        prev_ips
            .iter()
            .copied()
            .filter(|ip| Family::of(ip) == family)
            .collect()
    };
    // Over netlink, both families in one transaction, where that is sure.
    let mut doomed: Vec<(Family, &str, u64)> = Vec::new();
    let mut by_text: Vec<Family> = Vec::new();
    for &family in families {
        match doomed_by_handle(family, &key, &of_family(family), Claims::Kept) {
            Some(rules) => doomed.extend(rules.into_iter().map(|(c, h)| (family, c, h))),
            None => by_text.push(family),
        }
    }
    if !doomed.is_empty() && !iptables::nft_delete(TABLE, &doomed) {
        // A rule gone meanwhile (nothing was deleted): all by text.
        by_text = families.to_vec();
    }
    for family in by_text {
        let table = iptables::save_unless_absent(family, TABLE, &[FORWARD_CHAIN, RECORDS_CHAIN])
            .map_err(ipt_err)?;
        let lines = removal_lines(&table, |k| k == key, &of_family(family));
        iptables::restore(family, TABLE, &lines).map_err(ipt_err)?;
    }
    Ok(())
}

/// The records of one family read over netlink (nf_tables iptables only):
/// (address, attachment key, rule handle) per record.
fn nft_records(family: Family) -> Option<Vec<(IpAddr, String, u64)>> {
    let rules = iptables::nft_rules(family, TABLE, RECORDS_CHAIN)?;
    let mut out = Vec::new();
    for r in &rules {
        let comment = iptables::xt_comment(r)?;
        let ip = r.values.iter().find_map(|v| ip_of(v))?;
        out.push((ip, comment.get(..KEY_LEN)?.to_string(), r.handle));
    }
    Some(out)
}

fn ip_of(octets: &[u8]) -> Option<IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
        _ => None,
    }
}

/// The [`address_rules`] of `ips` as iptables-nft stores them, each made
/// once (a stored form costs an encoding and a decoding; a DEL compares
/// it with every rule that names the address).
fn stored_address_rules(ips: &[IpAddr]) -> Vec<(IpAddr, Vec<iptables::StoredForm>)> {
    ips.iter()
        .map(|&ip| {
            let forms = address_rules(ip)
                .iter()
                .filter_map(XtRule::stored_form)
                .collect();
            (ip, forms)
        })
        .collect()
}

/// Whether `rule` is exactly one of the address rules of `stored`
/// ([`stored_address_rules`]) as iptables-nft stores it (what
/// `iptables -D` with its text would delete).
fn is_address_rule(
    rule: &iptables::RuleSummary,
    stored: &[(IpAddr, Vec<iptables::StoredForm>)],
) -> bool {
    let [value] = rule.values.as_slice() else {
        return false;
    };
    let ip = ip_of(value);
    stored
        .iter()
        .filter(|(i, _)| Some(*i) == ip)
        .any(|(_, forms)| forms.iter().any(|form| form.is(rule)))
}

/// DEL over netlink (nf_tables iptables only): reads the records and the
/// per-address rules of one family, and returns the handles of this
/// attachment's records and of the rules of its addresses (those of
/// `prev` and the recorded ones, unless another attachment's record claims
/// the address), for [`del`] to delete in one transaction; none when there
/// is nothing to delete. `None` whenever it cannot be sure: legacy
/// iptables, a failed query, or a rule in `CNI-FORWARD` naming one of the
/// addresses in a form not recognised (the `iptables-save` path runs
/// then); and, with [`Claims::Refused`], an address another record claims.
fn doomed_by_handle(
    family: Family,
    key: &str,
    prev: &[IpAddr],
    claims: Claims,
) -> Option<Vec<(&'static str, u64)>> {
    let recs = nft_records(family)?;
    let forward = iptables::nft_rules(family, TABLE, FORWARD_CHAIN)?;
    let mut doomed: Vec<(&'static str, u64)> = Vec::new();
    let mut ips: Vec<IpAddr> = prev.to_vec();
    for (ip, _, handle) in recs.iter().filter(|(_, k, _)| k == key) {
        doomed.push((RECORDS_CHAIN, *handle));
        if !ips.contains(ip) {
            ips.push(*ip);
        }
    }
    let claimed = |ip: &IpAddr| recs.iter().any(|(i, k, _)| i == ip && k != key);
    if claims == Claims::Refused && ips.iter().any(claimed) {
        return None;
    }
    ips.retain(|ip| !claimed(ip));
    let octets = |ip: &IpAddr| match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    // Made when a rule names one of the addresses (none does on a repeated DEL).
    let mut stored = None;
    for rule in &forward {
        let named = ips.iter().any(|ip| rule.values.contains(&octets(ip)));
        if !named {
            continue;
        }
        let stored = stored.get_or_insert_with(|| stored_address_rules(&ips));
        if !is_address_rule(rule, stored) {
            return None;
        }
        doomed.push((FORWARD_CHAIN, rule.handle));
    }
    Some(doomed)
}

/// GC: removes the records of `network`'s attachments that are not in
/// `valid` (container ID, ifname), with their address rules.
pub fn gc(network: &str, valid: &[(String, String)]) -> Result<(), CniError> {
    let prefix = cni_fw::hash::network_key_prefix(network);
    let keep: Vec<String> = valid
        .iter()
        .map(|(cid, ifname)| cni_fw::hash::attachment_key(network, ifname, cid))
        .collect();
    for family in [Family::V4, Family::V6] {
        if !iptables::usable(family) {
            continue;
        }
        let table =
            iptables::save_unless_absent(family, TABLE, &[RECORDS_CHAIN]).map_err(ipt_err)?;
        let lines = removal_lines(
            &table,
            |k| k.starts_with(&prefix) && !keep.iter().any(|v| v == k),
            &[],
        );
        iptables::restore(family, TABLE, &lines).map_err(ipt_err)?;
    }
    Ok(())
}

/// CHECK: every rule ADD writes for `ips` (and the isolation rules) is there.
pub fn check(
    conf: &Conf,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
) -> Result<(), CniError> {
    for family in families(ips) {
        let table = iptables::save(family, TABLE).map_err(ipt_err)?;
        check_table(&table, conf, family, ips, isolation)?;
    }
    Ok(())
}

/// CHECK against one family's saved table.
pub fn check_table(
    table: &Table,
    conf: &Conf,
    family: Family,
    ips: &[IpAddr],
    isolation: Option<(&str, IngressPolicy)>,
) -> Result<(), CniError> {
    let has = |chain: &str, rule: &str| table.rules(chain).any(|r| r == rule);
    let missing = |chain: &str, rule: &str| {
        CniError::internal(format!("expected {chain} rule {} not found", shown(rule)))
    };
    let fwd = forward_jump();
    if !has("FORWARD", &fwd) {
        return Err(missing("FORWARD", &fwd));
    }
    let admin = admin_jump(&conf.admin_chain);
    if !has(FORWARD_CHAIN, &admin) {
        return Err(missing(FORWARD_CHAIN, &admin));
    }
    for ip in ips.iter().filter(|ip| Family::of(ip) == family) {
        for rule in address_rules(*ip).map(|r| r.text()) {
            if !has(FORWARD_CHAIN, &rule) {
                return Err(CniError::internal(format!(
                    "expected rule {} not found",
                    shown(&rule)
                )));
            }
        }
    }
    if let Some((bridge, policy)) = isolation {
        check_isolation_table(table, bridge, policy)?;
    }
    Ok(())
}

/// True when iptables can be used for `family` (for STATUS: the tool runs).
pub fn works(family: Family) -> bool {
    iptables::usable(family) && iptables::save(family, TABLE).is_ok()
}

/// The iptables backend.
pub struct Iptables;

impl crate::backend::FirewallBackend for Iptables {
    fn add(&mut self, req: &crate::backend::Request<'_>) -> Result<(), CniError> {
        require_tools(req.ips)?;
        add(req.conf, &req.att, req.ips, req.isolation)
    }

    /// Also forgets the firewalld record of this attachment when firewalld
    /// is no longer running (its runtime sources went with it).
    fn del(&mut self, req: &crate::backend::Request<'_>) -> Result<(), CniError> {
        crate::firewalld::forget_if_gone(&req.att)?;
        del(&req.att, req.ips)
    }

    /// [`del_shared`], after forgetting the attachment's firewalld record
    /// as [`del`] does (its own file).
    fn del_shared(&mut self, req: &crate::backend::Request<'_>) -> Result<bool, CniError> {
        crate::firewalld::forget_if_gone(&req.att)?;
        Ok(del_shared(&req.att, req.ips))
    }

    fn check(&mut self, req: &crate::backend::Request<'_>) -> Result<(), CniError> {
        require_tools(req.ips)?;
        check(req.conf, req.ips, req.isolation)
    }

    fn usable(&mut self) -> bool {
        works(Family::V4) || works(Family::V6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> Conf {
        crate::config::parse(
            &serde_json::json!({"cniVersion": "1.0.0", "name": "net1", "type": "firewall"}),
            cni_skel::ParseFor::Use,
        )
        .unwrap()
    }

    const ATT: Attachment<'static> = Attachment {
        network: "net1",
        container_id: "c1",
        ifname: "eth0",
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn first_add_on_an_empty_table() {
        let lines = add_lines(&Table::default(), &conf(), &ATT, &[ip("10.1.0.2")], None);
        let rec = format!(
            "-A CNI-FW-ATTACHMENTS -s 10.1.0.2/32 -m comment --comment \"{} name: net1 id: c1 if: eth0\"",
            ATT.key()
        );
        assert_eq!(
            lines,
            [
                ":CNI-FORWARD - [0:0]",
                ":CNI-ADMIN - [0:0]",
                ":CNI-FW-ATTACHMENTS - [0:0]",
                "-I FORWARD 1 -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD",
                "-I CNI-FORWARD 1 -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN",
                "-A CNI-FORWARD -d 10.1.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
                "-A CNI-FORWARD -s 10.1.0.2/32 -j ACCEPT",
                rec.as_str(),
            ]
        );
    }

    /// The rules sent over netlink are the restore lines ADD would run,
    /// rule for rule, in both families, once the chains exist.
    #[test]
    fn appended_rules_are_the_restore_lines() {
        for (family, addrs) in [
            (Family::V4, ["10.1.0.2", "10.1.0.3"]),
            (Family::V6, ["fd00::2", "fd00::3"]),
        ] {
            let ips: Vec<IpAddr> = addrs.iter().map(|a| ip(a)).collect();
            let setup = add_lines(&Table::default(), &conf(), &ATT, &[], None);
            let text: String = setup
                .iter()
                .map(|l| l.replacen("-I ", "-A ", 1).replacen(" 1 -m", " -m", 1) + "\n")
                .collect();
            let table = Table::from_text(text);
            let lines = add_lines(&table, &conf(), &ATT, &ips, None);
            let texts: Vec<String> = appended_rules(family, &ATT, &ips)
                .iter()
                .map(|r| format!("-A {} {}", r.chain, r.text()))
                .collect();
            assert_eq!(texts, lines);
        }
    }

    /// The per-address rules and records ADD appends, as they were before
    /// they became one description each (golden data captured from that
    /// code): the `iptables-restore` lines and the netlink rules
    /// (`XtRule`, whose bytes `cni_fw::iptables_nft`'s test compares with
    /// iptables-nft 1.8.9's).
    #[test]
    fn fp_rules_render_as_before() {
        let mut got = String::new();
        for (family, addr) in [(Family::V4, "10.173.0.2"), (Family::V6, "fd00:173::2")] {
            for rule in appended_rules(family, &ATT, &[ip(addr)]) {
                got += &format!("-A {} {}\n{rule:?}\n", rule.chain, rule.text());
            }
        }
        assert_eq!(got, include_str!("testdata/fp-appended-rules.txt"));
    }

    /// What Go v1.1.1 leaves after an ADD with same-bridge (verified).
    const GO_111: &str = r#":FORWARD ACCEPT [0:0]
:CNI-ADMIN - [0:0]
:CNI-FORWARD - [0:0]
:CNI-ISOLATION-STAGE-1 - [0:0]
:CNI-ISOLATION-STAGE-2 - [0:0]
-A FORWARD -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j CNI-ISOLATION-STAGE-1
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -d 10.1.0.9/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s 10.1.0.9/32 -j ACCEPT
-A CNI-ISOLATION-STAGE-1 -i br9 ! -o br9 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j CNI-ISOLATION-STAGE-2
-A CNI-ISOLATION-STAGE-1 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j RETURN
-A CNI-ISOLATION-STAGE-2 -o br9 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j DROP
-A CNI-ISOLATION-STAGE-2 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j RETURN
"#;

    #[test]
    fn upgrade_from_111_replaces_its_isolation_comments() {
        let t = Table::from_text(GO_111);
        let lines = add_lines(
            &t,
            &conf(),
            &ATT,
            &[ip("10.1.0.2")],
            Some(("br1", IngressPolicy::SameBridge)),
        );
        let c = "\"CNI firewall plugin rules (ingressPolicy: same-bridge|isolated)\"";
        let old = "\"CNI firewall plugin rules (ingressPolicy: same-bridge)\"";
        let want_tail = [
            format!("-D FORWARD -m comment --comment {old} -j CNI-ISOLATION-STAGE-1"),
            format!("-D CNI-ISOLATION-STAGE-1 -m comment --comment {old} -j RETURN"),
            format!("-D CNI-ISOLATION-STAGE-2 -m comment --comment {old} -j RETURN"),
            format!("-D CNI-ISOLATION-STAGE-2 -o br9 -m comment --comment {old} -j DROP"),
            format!("-I CNI-ISOLATION-STAGE-2 1 -o br9 -m comment --comment {c} -j DROP"),
            format!("-I FORWARD 1 -m comment --comment {c} -j CNI-ISOLATION-STAGE-1"),
            format!(
                "-I CNI-ISOLATION-STAGE-1 1 -i br1 ! -o br1 -m comment --comment {old} -j CNI-ISOLATION-STAGE-2"
            ),
            format!("-A CNI-ISOLATION-STAGE-1 -m comment --comment {c} -j RETURN"),
            format!("-I CNI-ISOLATION-STAGE-2 1 -o br1 -m comment --comment {c} -j DROP"),
            format!("-A CNI-ISOLATION-STAGE-2 -m comment --comment {c} -j RETURN"),
        ];
        assert_eq!(lines[lines.len() - want_tail.len()..], want_tail);
        // The chains and jumps existed: only the record chain is new.
        assert_eq!(lines[0], ":CNI-FW-ATTACHMENTS - [0:0]");
    }

    #[test]
    fn del_and_gc_follow_the_records() {
        let other = Attachment {
            network: "net2",
            container_id: "c2",
            ifname: "eth0",
        };
        let stale = Attachment {
            network: "net1",
            container_id: "gone",
            ifname: "eth0",
        };
        let mut text = String::from(":CNI-FORWARD - [0:0]\n:CNI-FW-ATTACHMENTS - [0:0]\n");
        for (addr, att) in [("10.1.0.2", ATT), ("10.1.0.3", stale), ("10.1.0.2", other)] {
            for r in address_rules(ip(addr)) {
                text.push_str(&format!("-A CNI-FORWARD {}\n", r.text()));
            }
            text.push_str(&format!(
                "-A CNI-FW-ATTACHMENTS {}\n",
                record_rule(ip(addr), &att).text()
            ));
        }
        let t = Table::from_text(text);
        assert_eq!(records(&t).len(), 3);
        // DEL of ATT without prevResult: its record goes, but 10.1.0.2's
        // rules stay for net2's container (two copies exist; both stay).
        let key = ATT.key();
        let lines = removal_lines(&t, |k| k == key, &[]);
        assert_eq!(
            lines,
            [format!(
                "-D CNI-FW-ATTACHMENTS {}",
                record_rule(ip("10.1.0.2"), &ATT).text()
            )]
        );
        // GC of net1 keeping only c1: the stale attachment's record and rules.
        let prefix = cni_fw::hash::network_key_prefix("net1");
        let lines = removal_lines(&t, |k| k.starts_with(&prefix) && k != key, &[]);
        assert_eq!(
            lines,
            [
                format!("-D CNI-FW-ATTACHMENTS {}", record_rule(ip("10.1.0.3"), &stale).text()),
                "-D CNI-FORWARD -d 10.1.0.3/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT".to_string(),
                "-D CNI-FORWARD -s 10.1.0.3/32 -j ACCEPT".to_string(),
            ]
        );
    }

    #[test]
    fn check_messages_read_like_the_reference() {
        let t = Table::from_text(":FORWARD ACCEPT [0:0]\n");
        let e = check_table(&t, &conf(), Family::V4, &[ip("10.1.0.2")], None).unwrap_err();
        assert_eq!(
            e.msg,
            "expected FORWARD rule [-m comment --comment CNI firewall plugin rules -j CNI-FORWARD] not found"
        );
        let lines = add_lines(&Table::default(), &conf(), &ATT, &[ip("fd00::2")], None);
        let text: String = lines
            .iter()
            .map(|l| {
                l.replacen("-I FORWARD 1", "-A FORWARD", 1).replacen(
                    "-I CNI-FORWARD 1",
                    "-A CNI-FORWARD",
                    1,
                ) + "\n"
            })
            .collect();
        let t = Table::from_text(text);
        check_table(&t, &conf(), Family::V6, &[ip("fd00::2")], None).unwrap();
        let e = check_table(&t, &conf(), Family::V6, &[ip("fd00::3")], None).unwrap_err();
        assert_eq!(
            e.msg,
            "expected rule [-d fd00::3/128 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT] not found"
        );
    }
}
