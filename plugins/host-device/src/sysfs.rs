//! Finding a device's netdev name through sysfs: under a kernel device path,
//! a PCI address or an auxiliary device, and whether a PCI function is
//! bound to a userspace (DPDK) driver. The root is injectable so the
//! lookups are tested on a fake tree.

use std::path::{Path, PathBuf};

/// Drivers that hand a PCI function to userspace: no netdev to move.
const USERSPACE_DRIVERS: [&str; 3] = ["vfio-pci", "uio_pci_generic", "igb_uio"];

/// A sysfs tree: `/sys` on a real system.
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs {
            root: PathBuf::from("/sys"),
        }
    }
}

/// Where `deviceID` (from a device plugin) points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceId {
    /// A PCI function (`/sys/bus/pci/devices/<id>`).
    Pci(String),
    /// An auxiliary bus device (`/sys/bus/auxiliary/devices/<id>`).
    Auxiliary(String),
}

impl Sysfs {
    /// A tree rooted at `root` instead of `/sys`.
    #[cfg(test)]
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    fn pci(&self, id: &str) -> PathBuf {
        self.root.join("bus/pci/devices").join(id)
    }

    fn aux(&self, id: &str) -> PathBuf {
        self.root.join("bus/auxiliary/devices").join(id)
    }

    /// Resolves a `deviceID`: PCI first, then auxiliary.
    pub fn device_id(&self, id: &str) -> Result<DeviceId, String> {
        if !safe_component(id) {
            return Err(format!(
                "runtime config DeviceID {id} not found or unsupported"
            ));
        }
        if self.pci(id).exists() {
            Ok(DeviceId::Pci(id.to_string()))
        } else if self.aux(id).exists() {
            Ok(DeviceId::Auxiliary(id.to_string()))
        } else {
            Err(format!(
                "runtime config DeviceID {id} not found or unsupported"
            ))
        }
    }

    /// True when the PCI function is bound to a userspace driver. A missing
    /// device or driver link is an error, as in the reference.
    pub fn is_userspace_driven(&self, pci: &str) -> Result<bool, String> {
        if !safe_component(pci) {
            return Err(format!(
                "error with host device: invalid PCI address {pci:?}"
            ));
        }
        let link = self.pci(pci).join("driver");
        let target = std::fs::read_link(&link).map_err(|e| {
            format!(
                "error with host device: lstat {}: {}",
                link.display(),
                go_io(&e)
            )
        })?;
        let driver = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(USERSPACE_DRIVERS.contains(&driver.as_str()))
    }

    /// The netdev under a kernel device path (`/sys/devices/...`).
    pub fn netdev_of_kernel_path(&self, path: &str) -> Result<String, String> {
        if !path.starts_with("/sys/devices/") || path.split('/').any(|c| c == "..") {
            return Err(format!(
                "kernel device path {path:?} must be absolute and begin with /sys/devices/"
            ));
        }
        let rel = path.trim_start_matches("/sys/");
        first_entry(&self.root.join(rel).join("net"))
            .map_err(|e| format!("failed to find network device in device path {path}: {e}"))
    }

    /// The netdev of a PCI function: `<dev>/net/`, or `<dev>/virtio*/net/`.
    pub fn netdev_of_pci(&self, pci: &str) -> Result<String, String> {
        if !safe_component(pci) {
            return Err(format!("no net directory under pci device {pci}"));
        }
        let dev = self.pci(pci);
        let mut net = dev.join("net");
        if !net.is_dir() {
            let virtio = std::fs::read_dir(&dev)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("virtio"))
                })
                .map(|p| p.join("net"))
                .find(|p| p.is_dir());
            net = virtio.ok_or_else(|| format!("no net directory under pci device {pci}"))?;
        }
        first_entry(&net)
            .map_err(|e| format!("failed to read net directory {}: {e}", net.display()))
    }

    /// The netdev of an auxiliary device: `<dev>/net/`.
    pub fn netdev_of_aux(&self, id: &str) -> Result<String, String> {
        let net = self.aux(id).join("net");
        first_entry(&net)
            .map_err(|e| format!("failed to read net directory {}: {e}", net.display()))
    }
}

/// A single path component: no `/`, not `.` or `..`, not empty.
fn safe_component(s: &str) -> bool {
    !s.is_empty() && !s.contains('/') && s != "." && s != ".." && !s.contains('\0')
}

/// The first entry of a directory, by name (the kernel lists one netdev
/// per device there, as a rule).
fn first_entry(dir: &Path) -> Result<String, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| go_io(&e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .next()
        .ok_or_else(|| format!("no network device in {}", dir.display()))
}

/// An I/O error as Go prints it (`no such file or directory`).
fn go_io(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = s.split(" (os error").next().unwrap_or(&s).to_string();
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake /sys: two PCI functions (a netdev and a vfio-bound VF), a
    /// virtio device, an auxiliary device and a platform device.
    fn tree() -> (PathBuf, Sysfs) {
        let root = std::env::temp_dir().join(format!(
            "rcni-hd-sysfs-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let mk = |p: &str| std::fs::create_dir_all(root.join(p)).unwrap();
        mk("bus/pci/drivers/vfio-pci");
        mk("bus/pci/drivers/ixgbe");
        mk("bus/pci/devices/0000:01:00.0/net/ens1f0");
        symlink(
            "../../../bus/pci/drivers/ixgbe",
            root.join("bus/pci/devices/0000:01:00.0/driver"),
        )
        .unwrap();
        mk("bus/pci/devices/0000:01:10.0");
        symlink(
            "../../../bus/pci/drivers/vfio-pci",
            root.join("bus/pci/devices/0000:01:10.0/driver"),
        )
        .unwrap();
        mk("bus/pci/devices/0000:00:04.0/virtio1/net/eth7");
        mk("bus/pci/devices/0000:00:05.0");
        mk("bus/auxiliary/devices/mlx5_core.sf.2/net/en3f0pf0sf2");
        mk("devices/platform/soc/ethernet0/net/end0");
        (root.clone(), Sysfs::at(root))
    }

    #[test]
    fn lookups_on_a_fake_tree() {
        let (root, s) = tree();
        assert_eq!(s.netdev_of_pci("0000:01:00.0").unwrap(), "ens1f0");
        assert_eq!(s.netdev_of_pci("0000:00:04.0").unwrap(), "eth7");
        assert_eq!(
            s.netdev_of_pci("0000:00:05.0").unwrap_err(),
            "no net directory under pci device 0000:00:05.0"
        );
        assert!(s.netdev_of_pci("../../..").is_err());
        assert_eq!(s.netdev_of_aux("mlx5_core.sf.2").unwrap(), "en3f0pf0sf2");
        assert_eq!(
            s.netdev_of_kernel_path("/sys/devices/platform/soc/ethernet0")
                .unwrap(),
            "end0"
        );
        for bad in ["/tmp/x", "sys/devices/x", "/sys/devices/../../etc"] {
            assert_eq!(
                s.netdev_of_kernel_path(bad).unwrap_err(),
                format!("kernel device path {bad:?} must be absolute and begin with /sys/devices/")
            );
        }
        assert!(
            s.netdev_of_kernel_path("/sys/devices/platform/none")
                .is_err()
        );

        assert_eq!(
            s.device_id("0000:01:10.0").unwrap(),
            DeviceId::Pci("0000:01:10.0".into())
        );
        assert_eq!(
            s.device_id("mlx5_core.sf.2").unwrap(),
            DeviceId::Auxiliary("mlx5_core.sf.2".into())
        );
        for bad in ["nope", "..", "a/b", ""] {
            assert_eq!(
                s.device_id(bad).unwrap_err(),
                format!("runtime config DeviceID {bad} not found or unsupported")
            );
        }

        assert!(!s.is_userspace_driven("0000:01:00.0").unwrap());
        assert!(s.is_userspace_driven("0000:01:10.0").unwrap());
        let e = s.is_userspace_driven("0000:00:05.0").unwrap_err();
        assert!(
            e.starts_with("error with host device: lstat ")
                && e.ends_with("0000:00:05.0/driver: no such file or directory"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
