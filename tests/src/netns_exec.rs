//! Starting a program inside a named network namespace the way
//! `ip netns exec NAME PROGRAM` does, without exec'ing `ip` first.
//!
//! `ip netns exec` costs an exec of `ip` (a dynamically linked program) on
//! top of the program's own: about 1 ms here, but 30-75 ms under
//! user-mode-linux, where every page fault and syscall is a round trip
//! through the host kernel. Here a short-lived thread does what `ip` does
//! before its `execvp` (iproute2's `netns_switch`):
//! - `setns` into `/run/netns/NAME`;
//! - a private mount namespace (`unshare(CLONE_NEWNS)`) with `/` made a
//!   recursive slave, so nothing mounted there propagates back;
//! - `/sys` detached and sysfs mounted again, so that `/sys/class/net` shows
//!   the namespace's links (sysfs shows the network namespace of whoever
//!   mounted it; host-device and cni-net's sysfs reads rely on that);
//! - each file of `/etc/netns/NAME` bound over its namespace in `/etc`;
//!
//! and then spawns the program (the thread's namespaces and root are the
//! child's). The child's pid is the program's, as with `ip netns exec`,
//! which execs without forking. All of it is safe code: namespaces and
//! mounts are per thread (`unshare(CLONE_NEWNS)` unshares only the calling
//! thread's file-system context), so no `pre_exec` hook, and the standard
//! library keeps spawning with `posix_spawn` (no copy of the test's memory
//! map, which under user-mode-linux costs more than the exec).

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};
use std::io;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Where `ip netns add` keeps its namespaces.
const NETNS_RUN_DIR: &str = "/run/netns";
/// Where `ip netns exec` finds per-namespace files for `/etc`.
const NETNS_ETC_DIR: &str = "/etc/netns";

/// Makes the calling thread what `ip netns exec name` makes itself before
/// it execs the program: in the namespace, in a private mount namespace
/// with the namespace's sysfs on `/sys` and the `/etc/netns/<name>` binds.
/// The thread cannot go back: use a thread of its own.
fn enter_like_ip_netns_exec(name: &str) -> io::Result<()> {
    let at = |what: &str, e: nix::Error| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("netns {name}: {what}: {e}"),
        )
    };
    let ns = std::fs::File::open(Path::new(NETNS_RUN_DIR).join(name))
        .map_err(|e| io::Error::new(e.kind(), format!("netns {name}: open: {e}")))?;
    setns(&ns, CloneFlags::CLONE_NEWNET).map_err(|e| at("setns", e))?;
    drop(ns);
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| at("unshare(CLONE_NEWNS)", e))?;
    // Nothing mounted from here on propagates back to the parent.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_SLAVE | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| at("make / rslave", e))?;
    // As ip: if /sys cannot be detached, sysfs goes over it, read-only
    // when the one below is (a read-write one cannot shadow it).
    let mut sysfs_flags = MsFlags::empty();
    if umount2("/sys", MntFlags::MNT_DETACH).is_err()
        && statvfs("/sys").is_ok_and(|st| st.flags().contains(FsFlags::ST_RDONLY))
    {
        sysfs_flags = MsFlags::MS_RDONLY;
    }
    mount(Some(name), "/sys", Some("sysfs"), sysfs_flags, None::<&str>)
        .map_err(|e| at("mount sysfs on /sys", e))?;
    bind_etc(name);
    Ok(())
}

/// Binds each file of `/etc/netns/<name>` over `/etc/<file>`; as ip, a
/// failed bind is reported and the rest goes on.
fn bind_etc(name: &str) {
    let dir = Path::new(NETNS_ETC_DIR).join(name);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let from = entry.path();
        let to = Path::new("/etc").join(entry.file_name());
        if let Err(e) = mount(
            Some(&from),
            &to,
            Some("none"),
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            eprintln!("Bind {} -> {} failed: {e}", from.display(), to.display());
        }
    }
}

/// Spawns `cmd` inside the network namespace `name` (`/run/netns/<name>`)
/// with what `ip netns exec name` gives a program (module docs); the
/// child's pid is the program's. Its stdio is what `cmd` says (inherited
/// unless set, as for [`Command::spawn`]).
pub fn spawn_in_netns(name: &str, cmd: &mut Command) -> io::Result<Child> {
    std::thread::scope(|s| {
        let entered = s.spawn(|| {
            enter_like_ip_netns_exec(name)?;
            cmd.spawn()
        });
        match entered.join() {
            Ok(spawned) => spawned,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// [`Command::output`] of `cmd` inside the network namespace `name`:
/// stdin from /dev/null, stdout and stderr captured.
pub fn output_in_netns(name: &str, cmd: &mut Command) -> io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_in_netns(name, cmd)?.wait_with_output()
}
