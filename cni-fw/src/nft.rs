//! nftables through one `nft -f -` transaction per change, and `nft -j`
//! listings to find our rules by comment.

use crate::exec::{self, ToolError};
use serde_json::Value;

/// True when the `nft` tool is installed.
pub fn usable() -> bool {
    exec::on_path("nft")
}

/// Applies a script atomically.
pub fn apply(script: &str) -> Result<(), ToolError> {
    if script.trim().is_empty() {
        return Ok(());
    }
    exec::run("nft", &["-f", "-"], script).map(|_| ())
}

/// A rule as listed: its handle and comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The chain holding it.
    pub chain: String,
    /// The kernel handle, for `delete rule … handle N`.
    pub handle: u64,
    /// The rule's comment, empty when it has none.
    pub comment: String,
}

/// The rules of `family table` (e.g. `inet cni_plugins_masquerade`); a
/// missing table has none.
pub fn list_rules(family: &str, table: &str) -> Result<Vec<Rule>, ToolError> {
    match exec::run("nft", &["-j", "list", "table", family, table], "") {
        Ok(text) => Ok(parse_rules(&text)),
        Err(e) if e.stderr.contains("No such file or directory") => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Extracts the rules from `nft -j list …` output.
pub fn parse_rules(json: &str) -> Vec<Rule> {
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .filter_map(|item| item.get("rule"))
        .filter_map(|r| {
            Some(Rule {
                chain: r.get("chain")?.as_str()?.to_string(),
                handle: r.get("handle")?.as_u64()?,
                comment: r
                    .get("comment")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
        })
        .collect()
}

/// Quotes a string for an nft script (comments hold no quotes: callers strip them).
pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listing() {
        let j = r#"{"nftables": [{"metainfo": {}}, {"table": {"family": "inet", "name": "t"}},
            {"rule": {"family": "inet", "table": "t", "chain": "c", "handle": 7, "comment": "abc-def, net: n", "expr": []}},
            {"rule": {"family": "inet", "table": "t", "chain": "p", "handle": 3, "expr": []}}]}"#;
        let rules = parse_rules(j);
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[0],
            Rule {
                chain: "c".into(),
                handle: 7,
                comment: "abc-def, net: n".into()
            }
        );
        assert_eq!(rules[1].comment, "");
        assert!(parse_rules("garbage").is_empty());
    }
}
