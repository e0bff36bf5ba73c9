//! host-local: the CNI IPAM plugin that hands out addresses from configured
//! ranges and keeps its state in files on the host, compatible with the Go
//! reference plugin's on-disk format (they can share a directory).
//!
//! - [`config`]: every configuration key, defaulted and validated.
//! - [`range`]: ranges and range sets.
//! - [`allocator`]: round-robin allocation over a [`allocator::Store`].
//! - [`store`]: the on-disk store (crash-safe writes, ownership index).
//! - [`resolv`]: `resolvConf` parsing.

pub mod allocator;
pub mod config;
pub mod range;
pub mod resolv;
pub mod store;

use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Dns, Output, Plugin};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use store::{Store, Sync};

/// The plugin.
pub struct HostLocal;

impl Plugin for HostLocal {
    fn about(&self) -> String {
        cni_skel::about("host-local")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load_value_for(&args.config, &args.args, cni_skel::ParseFor::Use)?;
        let dns = match &conf.resolv_conf {
            Some(path) => resolv::parse_file(path)?,
            None => Dns::default(),
        };
        let store = Store::create(&conf.network_dir())?;
        let ips = {
            let mut session = store.session(Sync::Fast)?;
            let ips = allocator::allocate(
                &conf.ranges,
                &mut session,
                &args.container_id,
                &args.ifname,
                &conf.requested,
            )?;
            // A delegating plugin killed mid-ADD leaves this process
            // running; its runtime may already have sent the DEL. Still
            // under the lock: give back exactly what this ADD took.
            if args.invoker_gone() {
                let taken: Vec<_> = ips.iter().map(|c| c.address.ip()).collect();
                allocator::Store::unreserve(&mut session, &taken)?;
                return Err(CniError::internal(format!(
                    "the process that asked for an address has exited: released {taken:?}"
                )));
            }
            ips
        };
        Ok(CniResult {
            cni_version: conf.cni_version,
            interfaces: Vec::new(),
            ips,
            routes: conf.routes,
            dns,
        }
        .into())
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load_value_for(&args.config, &args.args, cni_skel::ParseFor::Del)?;
        // Nothing to release when the directory does not exist; do not create it.
        let Some(store) = Store::open_existing(&conf.network_dir())? else {
            return Ok(Output::Nothing);
        };
        // DEL reads every file rather than trusting the index.
        let mut session = store.session(Sync::Full)?;
        session.release(&args.container_id, &args.ifname)?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load_value_for(&args.config, &args.args, cni_skel::ParseFor::Use)?;
        let not_found = || {
            CniError::internal(format!(
                "host-local: Failed to find address added by container {}",
                args.container_id
            ))
        };
        // Reads only: a failed CHECK changes nothing in the directory.
        let Some(store) = Store::open_for_reading(&conf.network_dir())? else {
            return Err(not_found());
        };
        // A verified hit from the fast path is final; a miss is confirmed
        // by reading everything.
        for sync in [Sync::Fast, Sync::Full] {
            let mut session = store.session(sync)?;
            if !session
                .owned_by(&args.container_id, &args.ifname)
                .is_empty()
            {
                return Ok(Output::Nothing);
            }
        }
        Err(not_found())
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load_value_for(&args.config, &args.args, cni_skel::ParseFor::Use)?;
        let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
        let Some(store) = Store::open_existing(&conf.network_dir())? else {
            return Ok(Output::Nothing);
        };
        let mut session = store.session(Sync::Full)?;
        let released = session.gc(&valid)?;
        if !released.is_empty() {
            log::info!(
                "GC released {} address(es) of {}",
                released.len(),
                conf.name
            );
        }
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load_value_for(&args.config, &args.args, cni_skel::ParseFor::Use)?;
        let dir = conf.network_dir();
        let unavailable = |msg: String| {
            CniError::new(
                code::PLUGIN_NOT_AVAILABLE,
                msg,
                format!("ipam.dataDir: \"{}\"", conf.data_dir.display()),
            )
        };
        // Changes nothing in the directory (probes with an unnamed file).
        match Store::open_for_reading(&dir) {
            Ok(Some(store)) => store.probe_write().map_err(|e| unavailable(e.msg))?,
            Ok(None) => creatable(&dir).map_err(unavailable)?,
            Err(e) => return Err(unavailable(e.msg)),
        }
        let reserved = store::reserved_ips(&dir).map_err(|e| unavailable(e.msg))?;
        for (i, set) in conf.ranges.iter().enumerate() {
            let used = reserved
                .iter()
                .filter(|ip| set.contains(**ip) && !set.is_gateway(**ip))
                .count() as u128;
            if used >= set.capacity() {
                return Err(CniError::new(
                    code::PLUGIN_NOT_AVAILABLE,
                    format!("no IP addresses available in range set {i}: {set}"),
                    format!(
                        "{}: {used} of {} addresses reserved",
                        set.origin,
                        set.capacity()
                    ),
                ));
            }
        }
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&HostLocal)
}

/// Whether `dir` could be created: its nearest existing ancestor is a
/// directory we can create entries in (probed with an unnamed file, which
/// changes nothing there; without `O_TMPFILE`, with a temp directory).
fn creatable(dir: &Path) -> Result<(), String> {
    let mut p = dir;
    loop {
        match fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                if let Some(r) = store::probe_unnamed(p) {
                    return r.map_err(|e| format!("cannot create {}: {e}", dir.display()));
                }
                let probe = p.join(format!(".rcni-status-{}", std::process::id()));
                return fs::create_dir(&probe)
                    .and_then(|()| fs::remove_dir(&probe))
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()));
            }
            Ok(_) => {
                return Err(format!(
                    "cannot create {}: {} is not a directory",
                    dir.display(),
                    p.display()
                ));
            }
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                p = match p.parent() {
                    Some(q) if q.as_os_str().is_empty() => Path::new("."),
                    Some(q) => q,
                    None => return Err(format!("cannot create {}: {e}", dir.display())),
                };
            }
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
}
