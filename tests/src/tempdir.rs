//! Per-test temporary directories under `std::env::temp_dir()`, removed on
//! drop (also when the test panics).

use std::path::{Path, PathBuf};

/// A directory unique to this process and call, deleted with its contents on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/rcni-<tag>-<pid>-<n>`.
    #[allow(clippy::panic)] // a test helper: no temp dir means a broken test environment
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("rcni-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!("create {}: {e}", path.display());
        }
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A path inside the directory, as a string (for JSON configs and CNI_ARGS).
    pub fn file(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
