//! The bridge plugin's MAC spoof check (`macspoofchk`), laid out exactly as
//! the reference's `pkg/link/spoofcheck.go` lays it out, so either
//! implementation can tear down the other's rules:
//!
//! ```text
//! table bridge nat {
//!   chain PREROUTING { type filter hook prerouting priority -300; policy accept;
//!     iifname "<host veth>" jump cni-br-iface-<id> comment "macspoofchk-<id>"
//!   }
//!   chain cni-br-iface-<id> { jump cni-br-iface-<id>-mac comment "macspoofchk-<id>" }
//!   chain cni-br-iface-<id>-mac {
//!     ether saddr <container MAC> return comment "macspoofchk-<id>"
//!     drop comment "macspoofchk-<id>"
//!   }
//! }
//! ```
//!
//! where `<id>` is `<containerID>-<ifname>` ([`attachment_id`]) for every
//! interface name made of letters, digits, `_` and `.` but `mac` (`eth0`,
//! `net1`): the reference's names. Any other name is hex-encoded after a
//! `/`, a character no container ID or interface name has:
//! `<containerID>-/<hex of ifname>`. In the reference's scheme an ifname
//! reached the transaction as it was, so `;`, `#`, `{` or `$` in it broke
//! the pod's own transaction, and the ifname `eth0-mac` named the same
//! chain as `eth0`'s MAC chain (as did `a` + `b-c` and `a-b` + `c`):
//! one attachment's DEL flushed another's. Setup is one `nft -f -`
//! transaction; teardown is one listing plus one transaction.

use crate::exec::{self, ToolError};
use cni_skel::CniError;
use serde_json::Value;

const FAMILY: &str = "bridge";
const TABLE: &str = "nat";
const BASE_CHAIN: &str = "PREROUTING";
const COMMENT_PREFIX: &str = "macspoofchk-";
const CHAIN_PREFIX: &str = "cni-br-iface-";

/// The reference's `uniqueID(containerID, ifname)`.
pub fn ref_id(container_id: &str, ifname: &str) -> String {
    format!("{container_id}-{ifname}")
}

/// The ID of one attachment's chains and comments: the reference's
/// [`ref_id`] when `ifname` is made of `[A-Za-z0-9_.]` and is not `mac`,
/// else `<containerID>-/<hex of ifname>`. No two attachments share one,
/// and no attachment's chain is another's `-mac` chain: container IDs
/// are `[A-Za-z0-9_.-]` (validated by the skel), so in the reference's
/// form the last `-` ends the container ID and the interface name is
/// never `mac`; the encoded form alone has a `/`, once.
pub fn attachment_id(container_id: &str, ifname: &str) -> String {
    let plain = ifname != "mac"
        && !ifname.is_empty()
        && ifname
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if plain {
        ref_id(container_id, ifname)
    } else {
        format!("{container_id}-/{}", crate::hash::hex(ifname.as_bytes()))
    }
}

fn iface_chain(id: &str) -> String {
    format!("{CHAIN_PREFIX}{id}")
}

fn mac_chain(id: &str) -> String {
    format!("{CHAIN_PREFIX}{id}-mac")
}

fn rule_comment(id: &str) -> String {
    format!("{COMMENT_PREFIX}{id}")
}

/// The setup transaction: table, base chain, both per-attachment chains
/// (flushed, so a repeated setup replaces their rules) and the four rules.
pub fn setup_script(host_veth: &str, container_mac: &str, id: &str) -> String {
    let ic = iface_chain(id);
    let mc = mac_chain(id);
    let c = crate::nft::quote(&rule_comment(id));
    let veth = crate::nft::quote(host_veth);
    format!(
        "add table {FAMILY} {TABLE}\n\
         add chain {FAMILY} {TABLE} {BASE_CHAIN} {{ type filter hook prerouting priority -300 ; policy accept ; }}\n\
         add chain {FAMILY} {TABLE} {ic}\n\
         add chain {FAMILY} {TABLE} {mc}\n\
         flush chain {FAMILY} {TABLE} {ic}\n\
         flush chain {FAMILY} {TABLE} {mc}\n\
         add rule {FAMILY} {TABLE} {BASE_CHAIN} iifname {veth} jump {ic} comment {c}\n\
         add rule {FAMILY} {TABLE} {ic} jump {mc} comment {c}\n\
         add rule {FAMILY} {TABLE} {mc} ether saddr {container_mac} return comment {c}\n\
         add rule {FAMILY} {TABLE} {mc} drop comment {c}\n"
    )
}

/// Installs the spoof check for one attachment.
pub fn setup(
    host_veth: &str,
    container_mac: &str,
    container_id: &str,
    ifname: &str,
) -> Result<(), CniError> {
    let id = attachment_id(container_id, ifname);
    crate::nft::apply(&setup_script(host_veth, container_mac, &id)).map_err(|e| {
        CniError::internal(format!("failed to setup spoof-check: {}", e.stderr.trim()))
    })
}

/// A base-chain rule of ours, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRule {
    /// Kernel handle.
    pub handle: u64,
    /// The attachment ID from the comment (`<cid>-<ifname>`).
    pub id: String,
    /// The host veth the rule matches (`iifname`), if it could be read.
    pub iifname: Option<String>,
}

/// What `nft -j list table bridge nat` says about our objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every chain name in the table.
    pub chains: Vec<String>,
    /// The base-chain rules carrying a `macspoofchk-` comment.
    pub base_rules: Vec<BaseRule>,
}

fn iifname_of(rule: &Value) -> Option<String> {
    rule.get("expr")?.as_array()?.iter().find_map(|e| {
        let m = e.get("match")?;
        let key = m.get("left")?.get("meta")?.get("key")?.as_str()?;
        (key == "iifname").then(|| m.get("right")?.as_str().map(str::to_string))?
    })
}

/// Parses `nft -j list table bridge nat`.
pub fn parse_listing(json: &str) -> Listing {
    let mut out = Listing::default();
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return out;
    };
    let Some(items) = v.get("nftables").and_then(Value::as_array) else {
        return out;
    };
    for item in items {
        if let Some(name) = item
            .get("chain")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
        {
            out.chains.push(name.to_string());
        }
        let Some(r) = item.get("rule") else { continue };
        if r.get("chain").and_then(Value::as_str) != Some(BASE_CHAIN) {
            continue;
        }
        let comment = r.get("comment").and_then(Value::as_str).unwrap_or_default();
        let (Some(id), Some(handle)) = (
            comment.strip_prefix(COMMENT_PREFIX),
            r.get("handle").and_then(Value::as_u64),
        ) else {
            continue;
        };
        out.base_rules.push(BaseRule {
            handle,
            id: id.to_string(),
            iifname: iifname_of(r),
        });
    }
    out
}

fn list() -> Result<Listing, ToolError> {
    match exec::run("nft", &["-j", "list", "table", FAMILY, TABLE], "") {
        Ok(text) => Ok(parse_listing(&text)),
        Err(e) if e.stderr.contains("No such file or directory") => Ok(Listing::default()),
        Err(e) => Err(e),
    }
}

/// The transaction removing the attachments `ids`: their base-chain rules,
/// then their two chains (only those that exist: nft cannot delete a
/// missing chain).
pub fn teardown_script(listing: &Listing, ids: &[&str]) -> String {
    let mut s = String::new();
    for r in listing
        .base_rules
        .iter()
        .filter(|r| ids.contains(&r.id.as_str()))
    {
        s.push_str(&format!(
            "delete rule {FAMILY} {TABLE} {BASE_CHAIN} handle {}\n",
            r.handle
        ));
    }
    // The iface chain jumps to the mac chain, so it goes first.
    for id in ids {
        for chain in [iface_chain(id), mac_chain(id)] {
            if listing.chains.contains(&chain) {
                s.push_str(&format!("delete chain {FAMILY} {TABLE} {chain}\n"));
            }
        }
    }
    s
}

/// Removes one attachment's spoof check. Nothing to remove is success.
pub fn teardown(container_id: &str, ifname: &str) -> Result<(), CniError> {
    let id = attachment_id(container_id, ifname);
    let err = |e: ToolError| {
        CniError::internal(format!(
            "failed to teardown spoof-check: {}",
            e.stderr.trim()
        ))
    };
    let listing = list().map_err(err)?;
    crate::nft::apply(&teardown_script(&listing, &[id.as_str()])).map_err(err)
}

/// GC: removes the spoof checks of attachments not in `valid` (container
/// ID, ifname) whose host veth `is_ours` says belongs to this network (a
/// port of its bridge, or gone). Rules of other networks stay.
pub fn gc(
    valid: &[(String, String)],
    is_ours: impl Fn(Option<&str>) -> bool,
) -> Result<(), CniError> {
    let err = |e: ToolError| CniError::internal(format!("spoof-check gc: {}", e.stderr.trim()));
    if !crate::nft::usable() {
        return Ok(());
    }
    let listing = list().map_err(err)?;
    // The reference's form too: a valid attachment whose rules Go made
    // (with an ifname we encode) keeps them.
    let keep: Vec<String> = valid
        .iter()
        .flat_map(|(c, i)| [attachment_id(c, i), ref_id(c, i)])
        .collect();
    let mut stale: Vec<&str> = listing
        .base_rules
        .iter()
        .filter(|r| !keep.contains(&r.id) && is_ours(r.iifname.as_deref()))
        .map(|r| r.id.as_str())
        .collect();
    stale.sort_unstable();
    stale.dedup();
    crate::nft::apply(&teardown_script(&listing, &stale)).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_matches_the_reference_layout() {
        let s = setup_script("veth1234abcd", "0a:58:0a:00:00:02", "cid-eth0");
        assert_eq!(
            s,
            "add table bridge nat\n\
             add chain bridge nat PREROUTING { type filter hook prerouting priority -300 ; policy accept ; }\n\
             add chain bridge nat cni-br-iface-cid-eth0\n\
             add chain bridge nat cni-br-iface-cid-eth0-mac\n\
             flush chain bridge nat cni-br-iface-cid-eth0\n\
             flush chain bridge nat cni-br-iface-cid-eth0-mac\n\
             add rule bridge nat PREROUTING iifname \"veth1234abcd\" jump cni-br-iface-cid-eth0 comment \"macspoofchk-cid-eth0\"\n\
             add rule bridge nat cni-br-iface-cid-eth0 jump cni-br-iface-cid-eth0-mac comment \"macspoofchk-cid-eth0\"\n\
             add rule bridge nat cni-br-iface-cid-eth0-mac ether saddr 0a:58:0a:00:00:02 return comment \"macspoofchk-cid-eth0\"\n\
             add rule bridge nat cni-br-iface-cid-eth0-mac drop comment \"macspoofchk-cid-eth0\"\n"
        );
    }

    const LISTING: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
      {"table": {"family": "bridge", "name": "nat", "handle": 1}},
      {"chain": {"family": "bridge", "table": "nat", "name": "PREROUTING", "handle": 1, "type": "filter", "hook": "prerouting", "prio": -300, "policy": "accept"}},
      {"chain": {"family": "bridge", "table": "nat", "name": "cni-br-iface-a-eth0", "handle": 2}},
      {"chain": {"family": "bridge", "table": "nat", "name": "cni-br-iface-a-eth0-mac", "handle": 3}},
      {"chain": {"family": "bridge", "table": "nat", "name": "cni-br-iface-b-eth0", "handle": 7}},
      {"rule": {"family": "bridge", "table": "nat", "chain": "PREROUTING", "handle": 4, "comment": "macspoofchk-a-eth0",
        "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "vethaaaa"}}, {"jump": {"target": "cni-br-iface-a-eth0"}}]}},
      {"rule": {"family": "bridge", "table": "nat", "chain": "PREROUTING", "handle": 8, "comment": "macspoofchk-b-eth0",
        "expr": [{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "vethbbbb"}}, {"jump": {"target": "cni-br-iface-b-eth0"}}]}},
      {"rule": {"family": "bridge", "table": "nat", "chain": "PREROUTING", "handle": 9, "expr": []}},
      {"rule": {"family": "bridge", "table": "nat", "chain": "cni-br-iface-a-eth0", "handle": 5, "comment": "macspoofchk-a-eth0", "expr": []}}
    ]}"#;

    #[test]
    fn attachment_ids_are_the_references_or_encoded() {
        assert_eq!(attachment_id("cid", "eth0"), "cid-eth0");
        assert_eq!(attachment_id("a-b", "net1.5_x"), "a-b-net1.5_x");
        assert_eq!(attachment_id("cid", "eth0-mac"), "cid-/657468302d6d6163");
        assert_eq!(attachment_id("cid", "mac"), "cid-/6d6163");
        assert_eq!(attachment_id("c", "e;#{$"), "c-/653b237b24");
        // What collided: an ifname and another's MAC chain, and the split
        // of `-` between container ID and ifname.
        let chains = |c: &str, i: &str| {
            let id = attachment_id(c, i);
            [iface_chain(&id), mac_chain(&id)]
        };
        let pairs = [
            (("c", "eth0"), ("c", "eth0-mac")),
            (("a", "b-c"), ("a-b", "c")),
            (("x", "eth0"), ("x-eth0", "mac")),
            (("c", "a\"b"), ("c", "ab")),
        ];
        for ((c1, i1), (c2, i2)) in pairs {
            for a in chains(c1, i1) {
                assert!(!chains(c2, i2).contains(&a), "{c1}/{i1} {c2}/{i2}: {a}");
            }
        }
    }

    #[test]
    fn parses_listing() {
        let l = parse_listing(LISTING);
        assert_eq!(l.chains.len(), 4);
        assert_eq!(
            l.base_rules,
            vec![
                BaseRule {
                    handle: 4,
                    id: "a-eth0".into(),
                    iifname: Some("vethaaaa".into())
                },
                BaseRule {
                    handle: 8,
                    id: "b-eth0".into(),
                    iifname: Some("vethbbbb".into())
                }
            ]
        );
        assert_eq!(parse_listing("nope"), Listing::default());
    }

    #[test]
    fn teardown_deletes_rule_and_existing_chains() {
        let l = parse_listing(LISTING);
        assert_eq!(
            teardown_script(&l, &["a-eth0"]),
            "delete rule bridge nat PREROUTING handle 4\n\
             delete chain bridge nat cni-br-iface-a-eth0\n\
             delete chain bridge nat cni-br-iface-a-eth0-mac\n"
        );
        // b has no -mac chain left: only what exists is deleted.
        assert_eq!(
            teardown_script(&l, &["b-eth0"]),
            "delete rule bridge nat PREROUTING handle 8\n\
             delete chain bridge nat cni-br-iface-b-eth0\n"
        );
        assert_eq!(teardown_script(&l, &["zzz"]), "");
    }
}
