//! Child processes that do not outlive the plugin.
//!
//! A plugin killed mid-ADD (a runtime's timeout, an OOM kill) would leave
//! the `iptables-restore` or `nft` it started running, and that tool could
//! apply its rules after the runtime's DEL had cleaned up: rules nobody
//! removes. [`die_with_parent`] ties such a child to the plugin instead.
//! The tools commit in one transaction, so a kill leaves nothing half made.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the process `cmd` starts get SIGKILL when the thread that starts
/// it exits (`PR_SET_PDEATHSIG`); if the plugin is already gone by the time
/// the child sets that up, the child does not run at all.
#[allow(unsafe_code)]
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id();
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe work is allowed: it makes two system calls
    // (prctl(2), getppid(2)) and builds errors from raw errno values,
    // allocating nothing and taking no locks.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        })
    }
}

/// Takes ownership of file descriptor `fd` inherited from the parent (systemd
/// socket activation passes listeners as fds 3, 4, ...), after checking it
/// is open, and marks it close-on-exec. `None` when `fd` is not open.
#[allow(unsafe_code)]
pub fn take_inherited_fd(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    if fd < 3 {
        return None; // stdio is never a passed listener
    }
    // SAFETY: the borrow lives only for this call; F_GETFD on a closed fd
    // fails with EBADF and touches nothing.
    let open = fcntl(
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
        FcntlArg::F_GETFD,
    )
    .is_ok();
    if !open {
        return None;
    }
    // SAFETY: the fd is open, was handed to this process to own (the
    // activation protocol), and nothing else in the process refers to it:
    // it is taken once, at start-up, before any other file is opened.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let _ = fcntl(&owned, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    Some(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tied_child_runs_normally() {
        let out = die_with_parent(Command::new("sh").args(["-c", "echo ok"]))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"ok\n");
    }

    #[test]
    fn a_tied_child_dies_with_the_thread_that_started_it() {
        // The thread that spawns is the "parent" for PR_SET_PDEATHSIG: when
        // it exits, the child is killed, as when the whole plugin dies.
        let mut child = std::thread::spawn(|| {
            die_with_parent(Command::new("sleep").arg("30"))
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for us to reap it.
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sleep outlived its parent thread"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
    }
}
