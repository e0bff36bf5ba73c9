//! `dhcp daemon`: the long-lived process that holds one DHCP client per
//! attachment and answers the plugin's RPCs on a unix socket.
//!
//! Threads, no async runtime: the accept loop on the main thread, one
//! thread per RPC connection (Go's plugin opens one per call; at most 32
//! at once, each with a deadline for its request: `netrpc::Limits`), one
//! scheduler for renewals that starts a short-lived worker per due lease,
//! and one thread waiting for SIGINT/SIGTERM.

mod client;
mod clock;
pub(crate) mod config;
mod flags;
mod lease;
mod service;

/// Writes our pid (decimal, mode 0644, as the reference does) to `path`,
/// never through a symlink and never into a file that is not a plain file
/// of ours with one name: an administrator may point `-pidfile` into a
/// directory others can write (`/tmp`), where a planted symlink or hard
/// link would have had root truncate and overwrite the file it names. The
/// open does not wait on a FIFO planted there either.
fn write_pidfile(path: &str) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file()
        || meta.nlink() != 1
        || meta.uid() != nix::unistd::geteuid().as_raw()
    {
        return Err(std::io::Error::other(
            "not a regular file of ours with one link; refusing to write it",
        ));
    }
    file.set_len(0)?;
    file.write_all(std::process::id().to_string().as_bytes())
}

#[cfg(test)]
mod live_tests;

use lease::Store;
use nix::sys::signal::{SigSet, Signal};
use service::Daemon;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub const DEFAULT_SOCKET_PATH: &str = "/run/cni/dhcp.sock";

pub fn main(args: Vec<OsString>) -> ExitCode {
    init_logger();
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let flags = match flags::parse(&args) {
        Ok(f) => f,
        Err(flags::Stop::Help) => {
            eprint!("{}", flags::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(flags::Stop::Error(e)) => {
            eprint!("{e}\n{}", flags::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut flags: flags::Flags) -> Result<(), String> {
    if flags.socketpath.is_empty() {
        flags.socketpath = DEFAULT_SOCKET_PATH.to_string();
    }
    // Every thread started from here on inherits the blocked mask; the
    // signal thread takes them with sigwait.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .map_err(|e| format!("block signals: {e}"))?;

    if !flags.pidfile.is_empty() {
        if !Path::new(&flags.pidfile).is_absolute() {
            return Err(format!(
                "Error writing pidfile {:?}: path not absolute",
                flags.pidfile
            ));
        }
        write_pidfile(&flags.pidfile)
            .map_err(|e| format!("Error writing pidfile {:?}: {e}", flags.pidfile))?;
    }

    let socket_path = PathBuf::from(format!("{}{}", flags.hostprefix, flags.socketpath));
    let lease_dir = if flags.leasedir.is_empty() {
        socket_path
            .parent()
            .unwrap_or(Path::new("/"))
            .join("dhcp-leases")
    } else {
        PathBuf::from(&flags.leasedir)
    };
    let daemon = Daemon::new(
        Store::new(lease_dir),
        flags.hostprefix.clone(),
        client::Timing {
            timeout: flags.timeout,
            resend_max: flags.resendmax,
            resend_timeout: flags.resendtimeout,
        },
    );
    // Stored leases first: an RPC served before they are back could
    // acquire a second lease for an attachment that already has one.
    daemon.adopt_stored();
    let (listener, created) =
        get_listener(&socket_path).map_err(|e| format!("Error getting listener: {e}"))?;

    {
        let daemon = Arc::clone(&daemon);
        spawn("dhcp-maintain", move || daemon.maintain())?;
    }
    {
        let daemon = Arc::clone(&daemon);
        let socket = created.then(|| socket_path.clone());
        let pidfile = flags.pidfile.clone();
        spawn("dhcp-signals", move || {
            let sig = signals.wait();
            log::info!("{sig:?}: shutting down");
            daemon.stop();
            if let Some(s) = &socket {
                let _ = std::fs::remove_file(s);
            }
            if !pidfile.is_empty() {
                let _ = std::fs::remove_file(&pidfile);
            }
            std::process::exit(0);
        })?;
    }

    log::info!("listening on {}", socket_path.display());
    netrpc::serve(&listener, Arc::new(crate::rpc::Dhcp(daemon)), rpc_limits())
}

/// The RPC connections' bounds: `netrpc::Limits`' defaults (32 at once,
/// 30 s to send a request, 256 KiB stacks); `RCNI_DHCP_RPC_DEADLINE_MS`
/// sets the deadline (tests).
fn rpc_limits() -> netrpc::Limits {
    let mut limits = netrpc::Limits::default();
    let ms = std::env::var("RCNI_DHCP_RPC_DEADLINE_MS").ok();
    if let Some(ms) = ms
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
    {
        limits.deadline = std::time::Duration::from_millis(ms);
    }
    limits
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(256 * 1024)
        .spawn(f)
        .map(|_| ())
        .map_err(|e| format!("start thread {name}: {e}"))
}

/// The listening socket: the one systemd passed (socket activation, as
/// go-systemd's `activation.Listeners`), else our own at `path`. The bool
/// tells whether we created the socket file (and so remove it at exit).
fn get_listener(path: &Path) -> Result<(UnixListener, bool), String> {
    let passed = activation_fds();
    match passed.len() {
        0 => {}
        1 => {
            return match passed.into_iter().next().flatten() {
                Some(l) => Ok((l, false)),
                None => Err("LISTEN_FDS=1 but no FD found".into()),
            };
        }
        n => {
            return Err(format!(
                "Too many ({n}) FDs passed through socket activation"
            ));
        }
    }
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    }
    match bind_0600(path) {
        Ok(l) => Ok((l, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            // A socket file left by a daemon that died (SIGKILL, crash)
            // kept the reference from starting (plugins#760). If nobody
            // answers on it, it is stale: replace it. Anything else there
            // (a symlink planted to make us probe, bind or unlink through
            // it, a file) is left alone, as the reference leaves it.
            use std::os::unix::fs::FileTypeExt;
            let kind = std::fs::symlink_metadata(path)
                .map(|m| m.file_type())
                .map_err(|e| format!("listen unix {}: {e}", path.display()))?;
            if !kind.is_socket() {
                let what = if kind.is_symlink() {
                    "a symlink"
                } else {
                    "a file"
                };
                return Err(format!(
                    "listen unix {}: bind: address already in use (not a socket but {what}; remove it)",
                    path.display()
                ));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "listen unix {}: bind: address already in use (another daemon is serving it)",
                    path.display()
                ));
            }
            log::warn!("removing stale socket {}", path.display());
            std::fs::remove_file(path).map_err(|e| format!("remove {}: {e}", path.display()))?;
            bind_0600(path)
                .map(|l| (l, true))
                .map_err(|e| format!("listen unix {}: {e}", path.display()))
        }
        Err(e) => Err(format!("listen unix {}: {e}", path.display())),
    }
}

/// Binds a listening socket at `path` whose file is 0600 whatever the
/// process's umask: the umask is 0177 for the bind (a chmod afterwards
/// would leave the socket open to all for a moment, and follow a symlink
/// swapped in meanwhile). The umask is the process's: `run` binds before
/// it starts any thread.
fn bind_0600(path: &Path) -> std::io::Result<UnixListener> {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    umask(old);
    bound
}

/// The fds of the socket-activation protocol (`LISTEN_PID` = us,
/// `LISTEN_FDS` = n, fds 3..3+n), each `None` when it is not a listening
/// unix socket. The variables are removed, as go-systemd does.
fn activation_fds() -> Vec<Option<UnixListener>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    let Some(pid) = pid else {
        return Vec::new();
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Vec::new();
    }
    let n: i32 = fds.and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (0..n.clamp(0, 64))
        .map(|i| {
            let fd = cni_net::process::take_inherited_fd(3 + i)?;
            let listening =
                nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::AcceptConn)
                    .unwrap_or(false);
            listening.then(|| UnixListener::from(fd))
        })
        .collect()
}

/// Go's `log` format on stderr: `2006/01/02 15:04:05 message`; level from
/// `RCNI_LOG` (default info: the daemon's log is its only account).
fn init_logger() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, m: &log::Metadata) -> bool {
            m.level() <= log::max_level()
        }
        fn log(&self, r: &log::Record) {
            if self.enabled(r.metadata()) {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "{} {}",
                    clock::go_log_time(clock::now_secs()),
                    r.args()
                );
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    let level = match std::env::var("RCNI_LOG").unwrap_or_default().as_str() {
        "error" => log::LevelFilter::Error,
        "warn" => log::LevelFilter::Warn,
        "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        "off" => log::LevelFilter::Off,
        _ => log::LevelFilter::Info,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
