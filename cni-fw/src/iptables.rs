//! iptables through `iptables-save` and one `iptables-restore --noflush`
//! transaction per change (the xtables lock is taken with `-w`).

use crate::exec::{self, ToolError};

/// The address family of a netfilter operation: the one family type of
/// the workspace (`cni-net`'s, which routes and addresses use too), so a
/// plugin passes what it has without converting.
pub use cni_net::IpFamily as Family;

/// `family`'s `iptables-save`.
fn save_cmd(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-save",
        Family::V6 => "ip6tables-save",
    }
}

/// `family`'s `iptables-restore`.
fn restore_cmd(family: Family) -> &'static str {
    match family {
        Family::V4 => "iptables-restore",
        Family::V6 => "ip6tables-restore",
    }
}

/// True when the iptables tools for `family` are installed.
pub fn usable(family: Family) -> bool {
    tools(family).usable
}

/// True when the `iptables-restore` for `family` on `PATH` is the nf_tables
/// variant (`xtables-nft-multi`, possibly behind alternatives symlinks): its
/// tables and chains are then nf_tables objects of the same names, which can
/// be inspected over netlink without running a tool.
pub fn is_nft_variant(family: Family) -> bool {
    tools(family).nft
}

/// What `PATH` holds of one family's iptables tools.
#[derive(Clone, Copy)]
struct Tools {
    /// `iptables-save` and `iptables-restore` are both there.
    usable: bool,
    /// `iptables-restore` is the nf_tables variant.
    nft: bool,
}

/// `family`'s tools, looked up once per process (a walk of `PATH` and a
/// chain of `readlink`s): a firewall DEL asked six times.
fn tools(family: Family) -> Tools {
    static V4: std::sync::OnceLock<Tools> = std::sync::OnceLock::new();
    static V6: std::sync::OnceLock<Tools> = std::sync::OnceLock::new();
    let cell = match family {
        Family::V4 => &V4,
        Family::V6 => &V6,
    };
    *cell.get_or_init(|| {
        let [restore, save] = exec::which_each([restore_cmd(family), save_cmd(family)]);
        let nft = restore
            .as_deref()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().contains("nft")))
            .unwrap_or(false);
        Tools {
            usable: restore.is_some() && save.is_some(),
            nft,
        }
    })
}

/// True when iptables is the nf_tables variant and the kernel says `chain`
/// is not in `table` of that family: one netlink query instead of an
/// `iptables-save` run (1–2 ms). `false` whenever unsure (legacy iptables,
/// a failed query). No rule can jump to a chain that does not exist, so an
/// absent chain also means no rule refers to it.
pub fn chain_surely_absent(family: Family, table: &str, chain: &str) -> bool {
    if !is_nft_variant(family) {
        return false;
    }
    matches!(
        crate::nf_tables::chain_exists(family, table, chain),
        Ok(false)
    )
}

/// The rules of `chain` in `table` read over netlink, without running a
/// tool; `None` unless iptables is the nf_tables variant (whose rules are
/// nf_tables rules) and the query worked. A missing chain has no rules.
pub fn nft_rules(
    family: Family,
    table: &str,
    chain: &str,
) -> Option<Vec<crate::nf_tables::RuleSummary>> {
    if !is_nft_variant(family) {
        return None;
    }
    crate::nf_tables::NfTables::open(family)
        .and_then(|mut t| t.chain_rules(table, chain))
        .ok()
}

/// A rule as [`nft_rules`] reads it.
pub use crate::nf_tables::RuleSummary;

/// Deletes `rules` (family, chain, handle as [`nft_rules`] read it) of the
/// tables named `table` over netlink, every family in one transaction,
/// without running a tool. True when they are gone; false (nothing
/// deleted) unless iptables is the nf_tables variant in each family and
/// every rule was still there.
pub fn nft_delete(table: &str, rules: &[(Family, &str, u64)]) -> bool {
    use crate::nf_tables::NfFamily;
    if rules.iter().any(|(f, _, _)| !is_nft_variant(*f)) {
        return false;
    }
    let rules: Vec<(NfFamily, &str, u64)> = rules
        .iter()
        .map(|(f, chain, handle)| (NfFamily::from(*f), *chain, *handle))
        .collect();
    match crate::nf_tables::NfTables::open(NfFamily::Inet)
        .and_then(|mut t| t.delete_rules(table, &rules))
    {
        Ok(()) => true,
        Err(e) => {
            log::debug!(
                "deleting {} rules of {table} over netlink: {e}",
                rules.len()
            );
            false
        }
    }
}

/// Deletes the user chain `chain` of `table` and every rule of
/// `entry_chain` that jumps to it (what `-D <entry_chain> … -j <chain>`,
/// `-F <chain>` and `-X <chain>` lines would do), over netlink in one
/// transaction, reading the jumps on the same socket: no tool runs and no
/// table is read whole. True when they are gone (a chain that was not there
/// included); false (nothing changed) unless iptables is the nf_tables
/// variant and the kernel took it all (a rule gone or added meanwhile: the
/// caller then takes the text path).
pub fn nft_delete_chain(family: Family, table: &str, chain: &str, entry_chain: &str) -> bool {
    if !is_nft_variant(family) {
        return false;
    }
    let done = crate::nf_tables::NfTables::open(family).and_then(|mut t| {
        if !t.chain_exists(table, chain)? {
            return Ok(());
        }
        let jumps: Vec<(&str, u64)> = t
            .chain_rules(table, entry_chain)?
            .iter()
            .filter(|r| r.jumps.iter().any(|j| j == chain))
            .map(|r| (entry_chain, r.handle))
            .collect();
        t.delete_chain(table, chain, &jumps)
    });
    match done {
        Ok(()) => true,
        Err(e) => {
            log::debug!("deleting {table} {chain} over netlink: {e}");
            false
        }
    }
}

/// A rule for [`nft_append`].
pub use crate::iptables_nft::{
    CT_ESTABLISHED, CT_INVALID, CT_NEW, CT_RELATED, StoredForm, XtMatch, XtProto, XtRule, XtTarget,
};

/// Appends `rules` to `table` over netlink as iptables-nft encodes them
/// (what `iptables-restore` with `-A <chain> <rule>` lines would add), every
/// family in one transaction, without running a tool. True when they were
/// added; false (nothing added) unless iptables is the nf_tables variant in
/// each family and the kernel took them all (a chain gone meanwhile).
pub fn nft_append(table: &str, rules: &[XtRule]) -> bool {
    if rules.iter().any(|r| !is_nft_variant(r.family)) {
        return false;
    }
    match crate::iptables_nft::append_rules(table, rules) {
        Ok(()) => true,
        Err(e) => {
            log::debug!(
                "appending {} rules to {table} over netlink: {e}",
                rules.len()
            );
            false
        }
    }
}

/// Whether `chain` exists in `table`, asked over netlink; `None` unless
/// iptables is the nf_tables variant and the query worked.
pub fn nft_chain_exists(family: Family, table: &str, chain: &str) -> Option<bool> {
    if !is_nft_variant(family) {
        return None;
    }
    crate::nf_tables::chain_exists(family, table, chain).ok()
}

/// The text of an x_tables `comment` match of a rule read with
/// [`nft_rules`] (`struct xt_comment_info`: the NUL-terminated comment).
pub fn xt_comment(rule: &crate::nf_tables::RuleSummary) -> Option<String> {
    rule.xt_matches
        .iter()
        .find(|(name, _)| name == "comment")
        .map(|(_, info)| {
            let end = info.iter().position(|b| *b == 0).unwrap_or(info.len());
            String::from_utf8_lossy(&info[..end]).into_owned()
        })
}

/// The current rules of one table, as `iptables-save -t <table>` prints them.
pub fn save(family: Family, table: &str) -> Result<Table, ToolError> {
    exec::run(save_cmd(family), &["-t", table], "").map(|text| Table { text })
}

/// As [`save`], but an empty table without running a tool when the kernel
/// says none of `chains` exists (nf_tables variant only): a first ADD on a
/// node, whose rules all live in or jump to those chains, needs no read.
pub fn save_unless_absent(
    family: Family,
    table: &str,
    chains: &[&str],
) -> Result<Table, ToolError> {
    if chains.iter().all(|c| chain_surely_absent(family, table, c)) {
        return Ok(Table::default());
    }
    save(family, table)
}

/// Applies `lines` (without the `*table`/`COMMIT` frame) atomically.
pub fn restore(family: Family, table: &str, lines: &[String]) -> Result<(), ToolError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut payload = format!("*{table}\n");
    for l in lines {
        payload.push_str(l);
        payload.push('\n');
    }
    payload.push_str("COMMIT\n");
    exec::run(restore_cmd(family), &["--noflush", "-w"], &payload).map(|_| ())
}

/// One table's `iptables-save` output.
#[derive(Debug, Clone, Default)]
pub struct Table {
    text: String,
}

impl Table {
    /// Wraps save output (for tests).
    pub fn from_text(text: impl Into<String>) -> Table {
        Table { text: text.into() }
    }

    /// True when a user chain of that name exists.
    pub fn has_chain(&self, chain: &str) -> bool {
        self.text
            .lines()
            .any(|l| l.strip_prefix(':').and_then(|r| r.split(' ').next()) == Some(chain))
    }

    /// The rules of `chain`, each as printed after `-A <chain> `.
    pub fn rules<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.text.lines().filter_map(move |l| {
            l.strip_prefix("-A ")
                .and_then(|r| r.strip_prefix(chain))
                .and_then(|r| r.strip_prefix(' '))
        })
    }

    /// The user chains whose names start with `prefix`.
    pub fn chains_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.text.lines().filter_map(move |l| {
            l.strip_prefix(':')
                .and_then(|r| r.split(' ').next())
                .filter(|c| c.starts_with(prefix))
        })
    }
}

/// A batch of changes to one table, computed against its saved rules so that
/// it holds exactly the lines needed: chains are declared only when absent
/// (declaring an existing chain in `--noflush` mode flushes it), rules are
/// added only when absent and deleted only when present. Applied as one
/// `iptables-restore` transaction by [`Edit::apply`], so a failure changes
/// nothing.
///
/// Rules are written as `iptables-save` prints them (`-s 10.0.0.2/32 -m
/// comment --comment "x" -j ACCEPT`), which is what makes the presence tests
/// exact string comparisons.
#[derive(Debug)]
pub struct Edit<'t> {
    table: &'t Table,
    lines: Vec<String>,
    declared: Vec<String>,
    added: Vec<(String, String)>,
}

impl<'t> Edit<'t> {
    /// An empty batch against `table`'s current rules.
    pub fn new(table: &'t Table) -> Edit<'t> {
        Edit {
            table,
            lines: Vec::new(),
            declared: Vec::new(),
            added: Vec::new(),
        }
    }

    /// The saved table this batch is computed against.
    pub fn table(&self) -> &'t Table {
        self.table
    }

    /// True when `chain` exists or is declared by this batch.
    pub fn has_chain(&self, chain: &str) -> bool {
        self.table.has_chain(chain) || self.declared.iter().any(|c| c == chain)
    }

    /// True when `rule` is in `chain`, now or after this batch.
    pub fn has_rule(&self, chain: &str, rule: &str) -> bool {
        self.table.rules(chain).any(|r| r == rule)
            || self.added.iter().any(|(c, r)| c == chain && r == rule)
    }

    /// Creates `chain` unless it exists.
    pub fn ensure_chain(&mut self, chain: &str) {
        if !self.has_chain(chain) {
            self.lines.push(format!(":{chain} - [0:0]"));
            self.declared.push(chain.to_string());
        }
    }

    /// Inserts `rule` at the top of `chain` unless it is there.
    pub fn insert_unique(&mut self, chain: &str, rule: &str) {
        if !self.has_rule(chain, rule) {
            self.lines.push(format!("-I {chain} 1 {rule}"));
            self.added.push((chain.to_string(), rule.to_string()));
        }
    }

    /// Appends `rule` to `chain` unless it is there.
    pub fn append_unique(&mut self, chain: &str, rule: &str) {
        if !self.has_rule(chain, rule) {
            self.lines.push(format!("-A {chain} {rule}"));
            self.added.push((chain.to_string(), rule.to_string()));
        }
    }

    /// Deletes every copy of `rule` in `chain` that the saved table has.
    pub fn delete_all(&mut self, chain: &str, rule: &str) {
        let copies = self.table.rules(chain).filter(|r| *r == rule).count();
        for _ in 0..copies {
            self.lines.push(format!("-D {chain} {rule}"));
        }
    }

    /// The restore lines so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Applies the batch to `table_name` of `family` in one transaction
    /// (nothing runs when it is empty).
    pub fn apply(&self, family: Family, table_name: &str) -> Result<(), ToolError> {
        restore(family, table_name, &self.lines)
    }
}

/// Whether `name` is a chain name that iptables takes (at most 28 bytes,
/// no white space, not starting with `-` or `!`; the reference passes
/// such names to iptables as they are) and that iptables-restore, which
/// rcni writes through, reads as one word: no quotes or backslashes
/// (its quoting and escapes) and no control characters.
pub fn is_chain_word(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= crate::hash::MAX_CHAIN_LEN
        && !name.starts_with(['-', '!'])
        && name
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && !"\"'\\".contains(c))
}

/// Quotes a comment the way `iptables-save` prints it, so that the rules we
/// write read back byte for byte: the same escaping as Go's `%q` gives the
/// strings we quote.
pub fn quote(s: &str) -> String {
    crate::hash::go_quote(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAVE: &str = "# Generated\n*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:CNI-abc - [0:0]\n-A POSTROUTING -s 10.0.0.2/32 -m comment --comment \"x\" -j CNI-abc\n-A CNI-abc -d 10.0.0.0/24 -j ACCEPT\nCOMMIT\n";

    #[test]
    fn reads_chains_and_rules() {
        let t = Table::from_text(SAVE);
        assert!(t.has_chain("CNI-abc"));
        assert!(!t.has_chain("CNI-ab"));
        assert_eq!(
            t.rules("POSTROUTING").collect::<Vec<_>>(),
            vec!["-s 10.0.0.2/32 -m comment --comment \"x\" -j CNI-abc"]
        );
        assert_eq!(t.rules("CNI-abc").count(), 1);
        assert_eq!(
            t.chains_with_prefix("CNI-").collect::<Vec<_>>(),
            vec!["CNI-abc"]
        );
    }

    #[test]
    fn edit_writes_only_what_is_missing() {
        let t = Table::from_text(
            ":FORWARD ACCEPT [0:0]\n:CNI-X - [0:0]\n-A FORWARD -j CNI-X\n-A CNI-X -s 10.0.0.2/32 -j ACCEPT\n-A CNI-X -s 10.0.0.2/32 -j ACCEPT\n",
        );
        let mut e = Edit::new(&t);
        e.ensure_chain("CNI-X");
        e.ensure_chain("CNI-Y");
        e.ensure_chain("CNI-Y");
        e.insert_unique("FORWARD", "-j CNI-X");
        e.insert_unique("FORWARD", "-j CNI-Y");
        e.append_unique("CNI-Y", "-j RETURN");
        e.append_unique("CNI-Y", "-j RETURN");
        e.delete_all("CNI-X", "-s 10.0.0.2/32 -j ACCEPT");
        e.delete_all("CNI-X", "-s 10.0.0.3/32 -j ACCEPT");
        assert_eq!(
            e.lines(),
            [
                ":CNI-Y - [0:0]",
                "-I FORWARD 1 -j CNI-Y",
                "-A CNI-Y -j RETURN",
                "-D CNI-X -s 10.0.0.2/32 -j ACCEPT",
                "-D CNI-X -s 10.0.0.2/32 -j ACCEPT",
            ]
        );
        assert!(e.has_rule("CNI-Y", "-j RETURN"));
    }

    #[test]
    fn chain_words() {
        for ok in ["KUBE-MARK-MASQ", "a#b", "PÄR-ADM", "x;y", &"X".repeat(28)] {
            assert!(is_chain_word(ok), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "a\tb",
            "a\u{a0}b",
            "a\u{1}b",
            "-x",
            "!x",
            "a\"b",
            "a'b",
            "a\\b",
            &"X".repeat(29),
        ] {
            assert!(!is_chain_word(bad), "{bad:?}");
        }
    }

    #[test]
    fn quotes_like_iptables_save() {
        assert_eq!(quote(r#"name: "n" id: "c""#), r#""name: \"n\" id: \"c\"""#);
    }
}
