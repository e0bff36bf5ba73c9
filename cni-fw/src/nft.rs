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

/// Checks a script against the kernel without applying it (`nft -c -f -`):
/// tells whether nftables can be used here at all.
pub fn check(script: &str) -> Result<(), ToolError> {
    exec::run("nft", &["-c", "-f", "-"], script).map(|_| ())
}

/// A rule as `nft -a list table` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRule {
    /// The chain holding it.
    pub chain: String,
    /// The rule's statements as nft prints them, without comment and handle.
    pub text: String,
    /// The rule's comment, empty when it has none.
    pub comment: String,
    /// The kernel handle, for `delete rule … handle N`.
    pub handle: u64,
}

/// One table as `nft -a list table` prints it: its chains, in order, and the
/// rules of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextTable {
    /// Chain names.
    pub chains: Vec<String>,
    /// Every rule of every chain.
    pub rules: Vec<TextRule>,
}

impl TextTable {
    /// The rules of `chain`.
    pub fn rules_of<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a TextRule> + 'a {
        self.rules.iter().filter(move |r| r.chain == chain)
    }

    /// True when the table has a chain of that name.
    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains.iter().any(|c| c == chain)
    }
}

/// Lists `family table` in text form with handles, one `nft` run; `None`
/// when the table does not exist.
pub fn list_table_text(family: &str, table: &str) -> Result<Option<TextTable>, ToolError> {
    match exec::run("nft", &["-a", "list", "table", family, table], "") {
        Ok(text) => Ok(Some(parse_table_text(&text))),
        Err(e) if e.stderr.contains("No such file or directory") => Ok(None),
        Err(e) => Err(e),
    }
}

/// Parses `nft -a list table …` output. Rules are the lines of a `chain`
/// block that end in `# handle N`; set and map blocks are skipped.
pub fn parse_table_text(text: &str) -> TextTable {
    let mut out = TextTable::default();
    let mut chain: Option<String> = None;
    let mut in_other_block = false;
    for line in text.lines() {
        let depth = line.len() - line.trim_start_matches('\t').len();
        let l = line.trim();
        if depth == 1 {
            if l == "}" {
                chain = None;
                in_other_block = false;
                continue;
            }
            if let Some(rest) = l.strip_prefix("chain ") {
                if let Some(name) = rest.split_whitespace().next() {
                    out.chains.push(name.to_string());
                    chain = Some(name.to_string());
                }
                continue;
            }
            if l.ends_with('{') || l.contains("{ #") {
                in_other_block = true;
            }
            continue;
        }
        if depth != 2 || in_other_block {
            continue;
        }
        let Some(chain) = &chain else { continue };
        let Some((body, handle)) = l.rsplit_once(" # handle ") else {
            continue;
        };
        let Ok(handle) = handle.trim().parse::<u64>() else {
            continue;
        };
        let (text, comment) = match body.rsplit_once(" comment \"") {
            Some((t, c)) if c.ends_with('"') => (t, c.trim_end_matches('"')),
            _ => match body.strip_prefix("comment \"") {
                Some(c) if c.ends_with('"') => ("", c.trim_end_matches('"')),
                _ => (body, ""),
            },
        };
        out.rules.push(TextRule {
            chain: chain.clone(),
            text: text.trim().to_string(),
            comment: comment.to_string(),
            handle,
        });
    }
    out
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

    #[test]
    fn parses_text_listing() {
        let t = "table ip cni_hostport { # handle 2\n\tcomment \"CNI portmap plugin\"\n\tset s { # handle 9\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1 }\n\t}\n\n\tchain hostports { # handle 1\n\t\ttcp dport 8080 dnat to 10.60.99.2:80 comment \"c1\" # handle 11\n\t\tip daddr 10.0.0.1 udp dport 8082 dnat to 10.60.99.2:82 # handle 12\n\t}\n\n\tchain prerouting { # handle 6\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tfib daddr type local jump hostports_all # handle 7\n\t}\n\tchain net_x { # handle 16\n\t\tcomment \"net: foo\"\n\t\treturn comment \"c2\" # handle 17\n\t}\n}\n";
        let table = parse_table_text(t);
        assert_eq!(table.chains, vec!["hostports", "prerouting", "net_x"]);
        assert_eq!(table.rules.len(), 4);
        assert_eq!(
            table.rules[0],
            TextRule {
                chain: "hostports".into(),
                text: "tcp dport 8080 dnat to 10.60.99.2:80".into(),
                comment: "c1".into(),
                handle: 11
            }
        );
        assert_eq!(table.rules[1].comment, "");
        assert_eq!(
            table.rules[2].text,
            "fib daddr type local jump hostports_all"
        );
        assert_eq!(table.rules[3].text, "return");
        assert_eq!(table.rules[3].comment, "c2");
        assert_eq!(table.rules_of("net_x").count(), 1);
        assert!(table.has_chain("prerouting") && !table.has_chain("s"));
    }
}
