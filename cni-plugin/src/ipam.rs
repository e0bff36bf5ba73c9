//! ADD's IPAM step as one job that undoes itself: [`IpamJob`]. It starts
//! the IPAM plugin (a child process) so that it runs while the caller
//! makes the links, is waited for once they are there, and releases what
//! it reserved (IPAM DEL) when the ADD fails, unless disarmed. bridge, ptp
//! and the link plugins ([`crate::link_plugin::add_with`]) run their IPAM
//! through it.

use crate::rollback::Rollback;
use cni_skel::delegate::{self, IpamLink, RunningAdd};
use cni_skel::{CmdArgs, CniError, CniResult, Command};

/// ADD on the config's IPAM plugin, from its start to the ADD's end.
///
/// Dropped before [`IpamJob::finish`] (the links could not be made), a
/// started ADD is waited for and, if it reserved something, undone by
/// IPAM DEL; a deferred one never ran. Dropped after a successful
/// [`IpamJob::finish`] and without [`IpamJob::disarm`], the reservation is
/// undone by IPAM DEL. Undo failures are logged, not returned: the ADD's
/// own error is what the runtime must see.
#[derive(Debug)]
#[must_use = "dropping the job undoes the IPAM ADD"]
pub struct IpamJob<'a> {
    args: &'a CmdArgs,
    /// The ADD running while the caller makes the links; `None` before
    /// [`IpamJob::finish`]: deferred to it.
    running: Option<RunningAdd>,
    /// Finished with a result that IPAM DEL undoes.
    reserved: bool,
}

impl<'a> IpamJob<'a> {
    /// Starts IPAM ADD at once when it needs no link
    /// ([`IpamLink::Unused`]: host-local, static), so that it runs while
    /// the caller makes the link; any other (dhcp sends from the link)
    /// is deferred until [`IpamJob::finish`].
    pub fn early(args: &'a CmdArgs) -> Result<IpamJob<'a>, CniError> {
        match IpamLink::of(args) {
            IpamLink::Unused => IpamJob::start(args),
            IpamLink::Needed => Ok(IpamJob {
                args,
                running: None,
                reserved: false,
            }),
        }
    }

    /// Starts IPAM ADD at once, whatever its type (ptp).
    pub fn start(args: &'a CmdArgs) -> Result<IpamJob<'a>, CniError> {
        Ok(IpamJob {
            args,
            running: Some(delegate::ipam_add_start(args)?),
            reserved: false,
        })
    }

    /// True (before [`IpamJob::finish`]) when IPAM runs only in it: the
    /// link it may use must be up (both ends of a veth) by then.
    pub fn deferred(&self) -> bool {
        self.running.is_none()
    }

    /// The IPAM result: the started ADD's, or one run now (called once).
    /// From here on the reservation is this job's to undo (when it is
    /// dropped) until [`IpamJob::disarm`].
    pub fn finish(&mut self) -> Result<CniResult, CniError> {
        let result = match self.running.take() {
            Some(running) => running.wait(),
            None => delegate::ipam_add(self.args),
        };
        self.reserved = result.is_ok();
        result
    }

    /// [`IpamJob::finish`], with the undo of the reservation handed to
    /// `rb`, so that it runs in order with the steps pushed there (bridge
    /// releases an address before its veth goes: dhcp sends its release
    /// from it).
    pub fn finish_onto(mut self, rb: &mut Rollback<'a>) -> Result<CniResult, CniError> {
        let result = self.finish()?;
        self.reserved = false;
        let args = self.args;
        rb.push("IPAM DEL", move || delegate::ipam_run(Command::Del, args));
        Ok(result)
    }

    /// Success: the reservation stays.
    pub fn disarm(mut self) {
        self.reserved = false;
    }
}

impl Drop for IpamJob<'_> {
    fn drop(&mut self) {
        let reserved = self.reserved || self.running.take().is_some_and(|r| r.wait().is_ok());
        if reserved && let Err(e) = delegate::ipam_run(Command::Del, self.args) {
            log::warn!("rollback: IPAM DEL: {}", e.msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcni_test_support::FakePlugin;
    use std::path::Path;

    fn args(dir: &Path, kind: &str) -> CmdArgs {
        let mut conf = cni_skel::NetConf::default();
        conf.ipam = Some(cni_skel::conf::IpamConf {
            kind: Some(kind.into()),
        });
        CmdArgs {
            command: Command::Add,
            container_id: "c".into(),
            netns: None,
            ifname: "eth0".into(),
            args: String::new(),
            path: vec![dir.to_path_buf()],
            netns_override: false,
            stdin: b"{\"cniVersion\":\"1.0.0\"}".to_vec(),
            config: Default::default(),
            conf,
            invoker: None,
        }
    }

    /// A fake IPAM plugin `kind` that appends its CNI_COMMAND to `log`
    /// beside itself and answers ADD with one address.
    fn fake_ipam(tag: &str, kind: &str) -> FakePlugin {
        FakePlugin::new(
            &format!("cni-plugin-ipam-{tag}"),
            kind,
            "echo $CNI_COMMAND >> \"${0%/*}/log\"\n[ $CNI_COMMAND = ADD ] && echo '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.172.0.2/24\"}]}'\nexit 0\n",
        )
    }

    fn log(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("log")).unwrap_or_default()
    }

    #[test]
    fn early_starts_only_an_ipam_that_needs_no_link() {
        let none = Path::new("/nonexistent");
        for kind in ["host-local", "static"] {
            // Started: the plugin must be found.
            assert!(IpamJob::early(&args(none, kind)).is_err(), "{kind}");
        }
        for kind in ["dhcp", "whereabouts", ""] {
            let a = args(none, kind);
            let job = IpamJob::early(&a).unwrap();
            assert!(job.deferred(), "{kind}");
        }
    }

    #[test]
    fn undone_unless_disarmed() {
        // Dropped unfinished: waited for, then undone.
        let fake = fake_ipam("unfinished", "host-local");
        let dir = fake.dir();
        let a = args(dir, "host-local");
        drop(IpamJob::early(&a).unwrap());
        assert_eq!(log(dir), "ADD\nDEL\n");
        // Finished, then dropped: undone.
        let fake = fake_ipam("finished", "dhcp");
        let dir = fake.dir();
        let a = args(dir, "dhcp");
        let mut job = IpamJob::early(&a).unwrap();
        assert_eq!(log(dir), "", "deferred");
        assert_eq!(job.finish().unwrap().ips.len(), 1);
        drop(job);
        assert_eq!(log(dir), "ADD\nDEL\n");
        // Finished and disarmed: kept.
        let fake = fake_ipam("disarmed", "static");
        let dir = fake.dir();
        let a = args(dir, "static");
        let mut job = IpamJob::start(&a).unwrap();
        job.finish().unwrap();
        job.disarm();
        assert_eq!(log(dir), "ADD\n");
        // A deferred job dropped never ran.
        let fake = fake_ipam("deferred", "dhcp");
        let dir = fake.dir();
        let a = args(dir, "dhcp");
        drop(IpamJob::early(&a).unwrap());
        assert_eq!(log(dir), "");
        // Handed to a rollback: undone when it runs, not when disarmed.
        let fake = fake_ipam("onto", "static");
        let dir = fake.dir();
        let a = args(dir, "static");
        let mut rb = Rollback::default();
        IpamJob::start(&a).unwrap().finish_onto(&mut rb).unwrap();
        assert_eq!(log(dir), "ADD\n");
        rb.run();
        assert_eq!(log(dir), "ADD\nDEL\n");
        let mut rb = Rollback::default();
        IpamJob::start(&a).unwrap().finish_onto(&mut rb).unwrap();
        rb.disarm();
        assert_eq!(log(dir), "ADD\nDEL\nADD\n");
    }
}
