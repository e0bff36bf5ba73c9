//! The ifb device of an attachment: its name, as the reference derives it,
//! and the alias that ties it to its attachment for GC.

/// The reference's prefix of ifb names.
pub const PREFIX: &str = "bwp";

/// `bwp` + the first 12 hex digits of sha512(network + containerID), as
/// the reference names it (so DEL here removes an ifb the Go plugin made,
/// and the other way round). Two interfaces of one container on one
/// network share this name, as in the reference.
pub fn name(network: &str, container_id: &str) -> String {
    cni_fw::hash::hash_with_prefix(
        cni_net::MAX_IFNAME_LEN,
        PREFIX,
        &format!("{network}{container_id}"),
    )
}

/// Marks an ifb this plugin made; the rest of the alias is `key=value`
/// words (names and IDs are `[A-Za-z0-9_.-]`, so no quoting is needed).
const ALIAS_TAG: &str = "cni-bandwidth";

/// The kernel refuses an alias of IFALIASZ (256) bytes or more.
const MAX_ALIAS: usize = 255;

/// `cni-bandwidth network=<net> containerID=<cid> ifname=<if>`, the
/// IFLA_IFALIAS of the ifb. GC needs only the network (the name says
/// which container); the rest is for people. Words are dropped from the
/// end when it would be too long; `None` when even the network does not fit.
pub fn alias(network: &str, container_id: &str, ifname: &str) -> Option<String> {
    let full = format!("{ALIAS_TAG} network={network} containerID={container_id} ifname={ifname}");
    let shorter = format!("{ALIAS_TAG} network={network} containerID={container_id}");
    let shortest = format!("{ALIAS_TAG} network={network}");
    [full, shorter, shortest]
        .into_iter()
        .find(|a| a.len() <= MAX_ALIAS)
}

/// The network an alias written by [`alias`] names.
pub fn alias_network(alias: &str) -> Option<&str> {
    let mut words = alias.split(' ');
    if words.next() != Some(ALIAS_TAG) {
        return None;
    }
    words.find_map(|w| w.strip_prefix("network="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_reference() {
        // more-plugins-meta.md, verified against the Go plugin.
        assert_eq!(name("bw", "cid1"), "bwp301e6c256607");
        assert_eq!(name("bw", "cid1").len(), 15);
    }

    #[test]
    fn alias_round_trip() {
        let a = alias("net-1", "abc", "eth0").unwrap();
        assert_eq!(a, "cni-bandwidth network=net-1 containerID=abc ifname=eth0");
        assert_eq!(alias_network(&a), Some("net-1"));
        assert_eq!(alias_network("network=x"), None);
        assert_eq!(alias_network("something else"), None);
        assert_eq!(alias_network(""), None);
        let long_id = "c".repeat(240);
        let a = alias("n", &long_id, "eth0").unwrap();
        assert!(!a.contains("ifname") && a.len() <= MAX_ALIAS);
        assert_eq!(alias_network(&a), Some("n"));
        let a = alias("n", &"c".repeat(300), "eth0").unwrap();
        assert_eq!(a, "cni-bandwidth network=n");
        assert_eq!(alias(&"n".repeat(300), "c", "eth0"), None);
    }
}
