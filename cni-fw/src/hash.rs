//! Names and comments derived from network names and container IDs, as the
//! reference's `pkg/utils` derives them.

use sha2::{Digest, Sha512};

/// Lowercase hex of the SHA-512 of `s`.
pub fn sha512_hex(s: &str) -> String {
    hex(&Sha512::digest(s.as_bytes()))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

const HEX: [u8; 16] = *b"0123456789abcdef";

/// `(prefix + sha512hex(s))[:len]` (`MustFormatHashWithPrefix`).
pub fn hash_with_prefix(len: usize, prefix: &str, s: &str) -> String {
    let mut out = format!("{prefix}{}", sha512_hex(s));
    out.truncate(len);
    out
}

/// The longest iptables chain name the reference generates.
pub const MAX_CHAIN_LEN: usize = 28;

/// `CNI-<hash(name+id)>`, 28 characters (`FormatChainName`).
pub fn chain_name(network: &str, container_id: &str) -> String {
    chain_name_with_prefix(network, container_id, "")
}

/// `CNI-<prefix><hash(name+id)>`, 28 characters (e.g. prefix `DN-` for portmap).
pub fn chain_name_with_prefix(network: &str, container_id: &str, prefix: &str) -> String {
    hash_with_prefix(
        MAX_CHAIN_LEN,
        &format!("CNI-{prefix}"),
        &format!("{network}{container_id}"),
    )
}

/// `<hash16(network)>-<hash16(ifname:cid)>`: a fixed-length key naming one
/// attachment, whose first 17 characters name its network (rcni's own tags:
/// the nftables masquerade comments, the firewall plugin's records).
pub fn attachment_key(network: &str, ifname: &str, container_id: &str) -> String {
    format!(
        "{}-{}",
        hash_with_prefix(16, "", network),
        hash_with_prefix(16, "", &format!("{ifname}:{container_id}"))
    )
}

/// The first part of [`attachment_key`]: every key of `network` starts with it.
pub fn network_key_prefix(network: &str) -> String {
    format!("{}-", hash_with_prefix(16, "", network))
}

/// `name: "<net>" id: "<cid>"` with Go's `%q` quoting (`FormatComment`).
pub fn comment(network: &str, container_id: &str) -> String {
    format!("name: {} id: {}", go_quote(network), go_quote(container_id))
}

/// Go's `%q` for the strings we quote: names and IDs are validated to
/// `[a-zA-Z0-9_.-]`, so escaping `"` and `\` covers every case that occurs.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_match_the_reference() {
        // sha512("testnetworkcontainer-id") starts with these hex digits,
        // the same value the reference's utils tests compute.
        let name = chain_name("test", "container-id");
        assert_eq!(name.len(), 28);
        assert!(name.starts_with("CNI-"));
        assert_eq!(&name[4..], &sha512_hex("testcontainer-id")[..24]);
        assert_eq!(chain_name_with_prefix("n", "c", "DN-").len(), 28);
        assert!(chain_name_with_prefix("n", "c", "DN-").starts_with("CNI-DN-"));
    }

    #[test]
    fn known_digest() {
        assert_eq!(&sha512_hex("abc")[..32], "ddaf35a193617abacc417349ae204131");
    }

    #[test]
    fn comments() {
        assert_eq!(comment("net1", "abc"), r#"name: "net1" id: "abc""#);
    }
}
