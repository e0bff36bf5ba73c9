//! Fake netfilter tools for the tests: a directory put first on a
//! plugin's `PATH` whose `iptables*`/`ip6tables*` are the real ones
//! recording their calls, the legacy ones, or one of them failing.

/// A directory put first on the plugin's PATH with its own `iptables`,
/// `iptables-save`, `iptables-restore` and the ip6tables ones: symlinks to
/// one program, which the plugin inspects (without running it) to tell
/// the nf_tables variant from the legacy one. Removed on drop.
pub struct Tools {
    dir: std::path::PathBuf,
}

impl Tools {
    fn dir() -> std::path::PathBuf {
        std::env::temp_dir().join(crate::unique("nft13tools"))
    }

    /// The tools behind a script named `name` that appends each call to
    /// `calls` and runs the real `xtables-nft-multi`. Named
    /// `xtables-nft-multi`, it is the nf_tables variant to the plugin; named
    /// otherwise, the plugin cannot tell and takes the text path.
    pub fn recording(name: &str) -> Tools {
        let dir = Tools::dir();
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join(name);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> {}/calls\nexec /usr/sbin/xtables-nft-multi \"$(basename \"$0\")\" \"$@\"\n",
                dir.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Tools::links(dir, &script)
    }

    /// Debian's legacy (x_tables) iptables.
    pub fn legacy() -> Tools {
        let dir = Tools::dir();
        std::fs::create_dir_all(&dir).unwrap();
        Tools::links(dir, std::path::Path::new("/usr/sbin/xtables-legacy-multi"))
    }

    /// iptables-nft (as [`Tools::recording`] named `xtables-nft-multi`, so
    /// the plugin takes it for the nf_tables variant), except `tool`, a
    /// script that reads its input and fails as a refused transaction does.
    /// The plugin cannot tell what the script is, so that family takes the
    /// text path.
    pub fn failing(tool: &str) -> Tools {
        let tools = Tools::recording("xtables-nft-multi");
        let script = tools.dir.join(tool);
        std::fs::remove_file(&script).unwrap();
        std::fs::write(
            &script,
            format!("#!/bin/sh\ncat >/dev/null\necho \"{tool}: line 2 failed (rcni test)\" >&2\nexit 1\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        tools
    }

    fn links(dir: std::path::PathBuf, target: &std::path::Path) -> Tools {
        // The x_tables multi-binary serves every tool of the list but nft.
        for t in crate::FIREWALL_TOOLS.iter().filter(|t| **t != "nft") {
            std::os::unix::fs::symlink(target, dir.join(t)).unwrap();
        }
        Tools { dir }
    }

    /// PATH with these tools first.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The calls recorded so far, emptied.
    pub fn take_calls(&self) -> Vec<String> {
        let f = self.dir.join("calls");
        let calls = std::fs::read_to_string(&f).unwrap_or_default();
        let _ = std::fs::remove_file(&f);
        calls.lines().map(String::from).collect()
    }

    /// Whether `tool` ran since the last look (the calls are emptied).
    pub fn ran(&self, tool: &str) -> bool {
        self.take_calls().iter().any(|c| c.starts_with(tool))
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
