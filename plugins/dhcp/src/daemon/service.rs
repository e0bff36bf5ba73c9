//! The daemon's state: one entry per attachment (client id), the RPC
//! methods over it, and the maintenance scheduler.
//!
//! Locks are held only to read or update the table, never across a DHCP
//! exchange: an RPC answers from the cached lease while a renewal runs
//! (the reference's Allocate waits for the lease's goroutine, and hangs
//! forever once that goroutine has exited). Acquisitions run on the RPC's
//! own thread (one per connection), renewals on a short-lived worker per
//! due lease: a slow or silent server stalls only its own attachments, and
//! no thread sits in a container's netns between exchanges, so a netns the
//! runtime deleted really goes away.

use super::client::{self, Failure, Identity, Timing};
use super::clock::{now_secs, rfc3339};
use super::config;
use super::lease::{NsIdentity, Record, Reopen, Store, Times, result_of};
use crate::rpc::{CmdArgs, Service};
use cni_net::NetNs;
use cni_skel::CniResult;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Where an attachment's lease stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Bound,
    Renewing,
    Rebinding,
    /// Expired or refused: reported to the next Allocate (CHECK) until DEL.
    Lost(String),
}

#[derive(Debug)]
struct Entry {
    record: Record,
    phase: Phase,
    /// When the maintainer next looks at this lease (epoch seconds).
    next: u64,
    /// A worker is running an exchange for it.
    busy: bool,
    /// Changes whenever the entry is replaced, so that a worker's late
    /// answer for a released lease is dropped.
    generation: u64,
}

#[derive(Default)]
struct Table {
    entries: HashMap<Vec<u8>, Entry>,
    /// Client ids whose first lease an RPC is acquiring right now.
    acquiring: HashSet<Vec<u8>>,
    next_generation: u64,
    stopping: bool,
}

pub struct Daemon {
    table: Mutex<Table>,
    /// Wakes RPCs waiting for an acquisition and the maintainer.
    changed: Condvar,
    store: Store,
    host_prefix: String,
    timing: Timing,
}

/// Renewal retries: half of the time left to the next deadline (RFC 2131
/// 4.4.5), at least this, at most a minute.
const MIN_RETRY: u64 = 4;
const MAX_RETRY: u64 = 60;

impl Daemon {
    pub fn new(store: Store, host_prefix: String, timing: Timing) -> Arc<Daemon> {
        Arc::new(Daemon {
            table: Mutex::new(Table::default()),
            changed: Condvar::new(),
            store,
            host_prefix,
            timing,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock cannot leave the table half
        // updated in a way that matters more than stopping would.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, Table>) -> MutexGuard<'a, Table> {
        self.changed.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// Number of leases held (bound, renewing, rebinding or lost).
    #[cfg(test)]
    pub fn lease_count(&self) -> usize {
        self.lock().entries.len()
    }

    /// Moves every lease's clock `secs` into the past (tests: reach T1,
    /// T2 or expiry without waiting) and wakes the maintainer.
    #[cfg(test)]
    pub fn age_leases(&self, secs: u64) {
        let mut t = self.lock();
        for e in t.entries.values_mut() {
            let times = &mut e.record.times;
            for v in [
                &mut times.acquired,
                &mut times.renew,
                &mut times.rebind,
                &mut times.expire,
            ] {
                *v = v.saturating_sub(secs);
            }
            e.next = e.next.saturating_sub(secs);
        }
        drop(t);
        self.changed.notify_all();
    }

    /// Takes back the leases a previous run stored, after checking that
    /// each netns path still names the lease's namespace and its link
    /// still exists; expired ones and those whose container is gone are
    /// dropped. Renewals due meanwhile run at once.
    pub fn adopt_stored(&self) {
        let now = now_secs();
        for mut r in self.store.load_all() {
            let id = String::from_utf8_lossy(&r.client_id).into_owned();
            if r.times.expire <= now {
                log::warn!("{id}: stored lease expired while the daemon was down; dropped");
                self.store.remove(&r.client_id);
                continue;
            }
            let alive = r.open_netns().map_err(|e| e.to_string()).and_then(|ns| {
                if r.netns_id.is_none() {
                    // Stored by a daemon that did not record it: the
                    // namespace found now is the best there is.
                    r.netns_id = Some(NsIdentity::of(&ns)?);
                    log::info!("{id}: netns of the stored lease recorded");
                }
                match client::link_exists(&ns, &r.if_name)? {
                    true => Ok(()),
                    false => Err(format!("link {:?} gone", r.if_name)),
                }
            });
            if let Err(e) = alive {
                log::warn!("{id}: {e}; stored lease dropped, nothing done in that netns");
                self.store.remove(&r.client_id);
                continue;
            }
            log::info!("{id}: re-adopted stored lease of {}", r.leased());
            let mut t = self.lock();
            let generation = t.next_generation;
            t.next_generation += 1;
            let next = r.times.renew;
            t.entries.insert(
                r.client_id.clone(),
                Entry {
                    record: r,
                    phase: Phase::Bound,
                    next,
                    busy: false,
                    generation,
                },
            );
        }
        self.changed.notify_all();
    }

    fn allocate_inner(&self, args: &CmdArgs) -> Result<CniResult, String> {
        let stdin = &args.stdin_data;
        let opts = config::parse(stdin, &args.args)?;
        let client_id = config::client_id(&args.container_id, &opts.net_name, &args.if_name);
        let id_text = String::from_utf8_lossy(&client_id).into_owned();

        let mut t = self.lock();
        loop {
            if let Some(e) = t.entries.get(&client_id) {
                if let Phase::Lost(why) = &e.phase {
                    return Err(format!("{id_text}: {why}"));
                }
                let ack = e
                    .record
                    .ack()
                    .ok_or_else(|| format!("{id_text}: stored DHCPACK unreadable"))?;
                return result_of(&ack, opts.priority);
            }
            if !t.acquiring.contains(&client_id) {
                break;
            }
            t = self.wait(t);
        }
        t.acquiring.insert(client_id.clone());
        drop(t);

        let outcome = self.acquire(args, &opts, &client_id);
        let mut t = self.lock();
        t.acquiring.remove(&client_id);
        let answer = match outcome {
            Ok((record, result)) => {
                if let Err(e) = self.store.save(&record) {
                    log::warn!("{id_text}: lease not persisted: {e}");
                }
                let generation = t.next_generation;
                t.next_generation += 1;
                let next = record.times.renew;
                t.entries.insert(
                    client_id,
                    Entry {
                        record,
                        phase: Phase::Bound,
                        next,
                        busy: false,
                        generation,
                    },
                );
                Ok(result)
            }
            Err(e) => Err(e),
        };
        drop(t);
        self.changed.notify_all();
        answer
    }

    fn netns_path(&self, netns: &str) -> PathBuf {
        PathBuf::from(format!("{}{}", self.host_prefix, netns))
    }

    /// The first lease of an attachment, on the calling (RPC) thread.
    fn acquire(
        &self,
        args: &CmdArgs,
        opts: &config::Options,
        client_id: &[u8],
    ) -> Result<(Record, CniResult), String> {
        let id_text = String::from_utf8_lossy(client_id).into_owned();
        log::info!("{id_text}: acquiring lease");
        let netns = self.netns_path(&args.netns);
        let ns = NetNs::open(&netns).map_err(|e| e.to_string())?;
        // What the path names now: later reopenings must find the same.
        let netns_id = Some(NsIdentity::of(&ns)?);
        let iface = client::resolve_iface(&ns, &args.if_name)?;
        let identity = Identity {
            client_id: client_id.to_vec(),
            request: opts.request.clone(),
            provide: opts.provide.clone(),
        };
        let ack = client::acquire(&ns, &iface, &identity, self.timing)?;
        let times = Times::from_ack(&ack, now_secs());
        let record = Record {
            client_id: client_id.to_vec(),
            container_id: args.container_id.clone(),
            net_name: opts.net_name.clone(),
            if_name: args.if_name.clone(),
            netns,
            netns_id,
            request: opts.request.clone(),
            provide: opts.provide.clone(),
            ack: ack.encode(),
            times,
        };
        match result_of(&ack, opts.priority) {
            Ok(result) => {
                log::info!(
                    "{id_text}: lease acquired ({}), expiration is {}",
                    ack.yiaddr,
                    rfc3339(times.expire)
                );
                Ok((record, result))
            }
            Err(e) => {
                // Not usable: give it back rather than hold it forever.
                send_release(&record);
                Err(e)
            }
        }
    }

    fn release_inner(&self, args: &CmdArgs) -> Result<(), String> {
        let net_name = config::net_name(&args.stdin_data)?;
        let client_id = config::client_id(&args.container_id, &net_name, &args.if_name);
        let mut t = self.lock();
        // An ADD still acquiring this lease: let it finish, then release.
        while t.acquiring.contains(&client_id) {
            t = self.wait(t);
        }
        let entry = t.entries.remove(&client_id);
        drop(t);
        if let Some(e) = entry {
            self.forget(e);
        }
        Ok(())
    }

    /// Releases a lease that is already out of the table.
    fn forget(&self, e: Entry) {
        self.store.remove(&e.record.client_id);
        if !matches!(e.phase, Phase::Lost(_)) {
            send_release(&e.record);
        }
        self.changed.notify_all();
    }

    /// `DHCP.GC`: releases every lease of this network whose attachment is
    /// not in `cni.dev/valid-attachments`.
    fn gc(&self, args: &CmdArgs) -> Result<(), String> {
        let net_name = config::net_name(&args.stdin_data)?;
        let valid =
            cni_skel::conf::valid_attachments(&args.stdin_data).map_err(|e| e.msg.clone())?;
        let stale: Vec<Entry> = {
            let mut t = self.lock();
            let ids: Vec<Vec<u8>> = t
                .entries
                .iter()
                .filter(|(_, e)| {
                    e.record.net_name == net_name
                        && !valid.iter().any(|(cid, ifn)| {
                            *cid == e.record.container_id && *ifn == e.record.if_name
                        })
                })
                .map(|(k, _)| k.clone())
                .collect();
            ids.iter().filter_map(|k| t.entries.remove(k)).collect()
        };
        for e in stale {
            log::info!(
                "{}: not a valid attachment any more (GC); releasing",
                String::from_utf8_lossy(&e.record.client_id)
            );
            self.forget(e);
        }
        Ok(())
    }

    /// Stops the maintainer (on SIGTERM). Leases stay stored for the next
    /// run; nothing is released (as the reference).
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.changed.notify_all();
    }

    /// The maintenance scheduler: sleeps until the earliest due lease and
    /// hands each due one to a worker thread. Returns after `stop`.
    pub fn maintain(self: &Arc<Self>) {
        let mut t = self.lock();
        loop {
            if t.stopping {
                return;
            }
            let now = now_secs();
            let mut due = Vec::new();
            let mut earliest: Option<u64> = None;
            for (id, e) in t.entries.iter_mut() {
                if e.busy || matches!(e.phase, Phase::Lost(_)) {
                    continue;
                }
                if e.next <= now {
                    e.busy = true;
                    due.push((id.clone(), e.generation, e.record.clone(), e.phase.clone()));
                } else {
                    earliest = Some(earliest.map_or(e.next, |x| x.min(e.next)));
                }
            }
            if !due.is_empty() {
                drop(t);
                let mut not_started = Vec::new();
                for (id, generation, record, phase) in due {
                    let me = Arc::clone(self);
                    let key = id.clone();
                    let spawned = std::thread::Builder::new()
                        .name("dhcp-renew".into())
                        .stack_size(256 * 1024)
                        .spawn(move || me.maintain_one(&id, generation, record, phase));
                    if let Err(e) = spawned {
                        log::error!("cannot start a renewal thread: {e}; retrying later");
                        not_started.push(key);
                    }
                }
                t = self.lock();
                // Out of threads: try those again in a few seconds.
                let later = now_secs() + MIN_RETRY;
                for id in not_started {
                    if let Some(e) = t.entries.get_mut(&id) {
                        e.busy = false;
                        e.next = later;
                    }
                }
                continue;
            }
            let wait = earliest.map_or(Duration::from_secs(3600), |at| {
                Duration::from_secs(at.saturating_sub(now).max(1))
            });
            t = self
                .changed
                .wait_timeout(t, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// One maintenance step of one lease (on its own thread).
    fn maintain_one(&self, id: &[u8], generation: u64, record: Record, phase: Phase) {
        let id_text = String::from_utf8_lossy(id).into_owned();
        let step = self.renew_step(&id_text, &record, &phase);
        let mut t = self.lock();
        let Some(e) = t.entries.get_mut(id) else {
            return; // released meanwhile
        };
        if e.generation != generation {
            return;
        }
        e.busy = false;
        match step {
            Step::Renewed(ack) => {
                e.record.ack = ack.encode();
                e.record.times = Times::from_ack(&ack, now_secs());
                e.phase = Phase::Bound;
                e.next = e.record.times.renew;
                log::info!(
                    "{id_text}: lease renewed, expiration is {}",
                    rfc3339(e.record.times.expire)
                );
                if let Err(err) = self.store.save(&e.record) {
                    log::warn!("{id_text}: lease not persisted: {err}");
                }
            }
            Step::Retry(phase, next) => {
                e.phase = phase;
                e.next = next;
            }
            Step::Lost(why) => {
                log::error!("{id_text}: {why}");
                e.phase = Phase::Lost(why);
                self.store.remove(id);
            }
            Step::Gone(why) => {
                log::warn!("{id_text}: {why}; lease dropped, nothing done in that netns");
                t.entries.remove(id);
                self.store.remove(id);
            }
        }
        drop(t);
        self.changed.notify_all();
    }

    fn renew_step(&self, id_text: &str, r: &Record, phase: &Phase) -> Step {
        let now = now_secs();
        // The container may be gone, or its path name another namespace
        // now: then stop, hold nothing of it, and touch nothing there.
        let ns = match r.open_netns() {
            Ok(ns) => ns,
            Err(Reopen::Unsure(e)) if now < r.times.expire => {
                return Step::Retry(phase.clone(), now + MIN_RETRY).log(id_text, &e);
            }
            Err(e) => return Step::Gone(e.to_string()),
        };
        match client::link_exists(&ns, &r.if_name) {
            Ok(true) => {}
            Ok(false) => return Step::Gone(format!("link {:?} gone", r.if_name)),
            Err(e) => return Step::Retry(phase.clone(), now + MIN_RETRY).log(id_text, &e),
        }
        if now >= r.times.expire {
            // Past expiry the address may be someone else's: take the
            // interface down, as the reference does.
            if let Err(e) = client::set_down(&ns, &r.if_name) {
                log::warn!("{id_text}: failed to bring {} DOWN: {e}", r.if_name);
            }
            return Step::Lost(format!(
                "lease of {} expired; interface {} set DOWN",
                r.leased(),
                r.if_name
            ));
        }
        let iface = match client::resolve_iface(&ns, &r.if_name) {
            Ok(i) => i,
            Err(e) => return Step::Retry(phase.clone(), now + MIN_RETRY).log(id_text, &e),
        };
        let identity = Identity {
            client_id: r.client_id.clone(),
            request: r.request.clone(),
            provide: r.provide.clone(),
        };
        let leased = r.leased();
        let rebinding = now >= r.times.rebind;
        let outcome = if rebinding {
            log::info!("{id_text}: rebinding lease");
            client::rebind(&ns, &iface, &identity, leased, self.timing.timeout)
        } else {
            log::info!("{id_text}: renewing lease");
            match r.server() {
                Some(server) => {
                    client::renew(&ns, &iface, &identity, leased, server, self.timing.timeout)
                }
                None => Err(Failure::Retry("no server identifier in the lease".into())),
            }
        };
        match outcome {
            Ok(ack) if ack.yiaddr == leased => Step::Renewed(ack),
            Ok(ack) => Step::Lost(format!(
                "server moved the lease from {leased} to {}; not following",
                ack.yiaddr
            )),
            Err(Failure::Nak(m)) => {
                let _ = client::set_down(&ns, &r.if_name);
                Step::Lost(format!(
                    "DHCP server refused the lease of {leased}{m}; interface {} set DOWN",
                    r.if_name
                ))
            }
            Err(Failure::Retry(e)) => {
                let (phase, until) = if rebinding {
                    (Phase::Rebinding, r.times.expire)
                } else {
                    (Phase::Renewing, r.times.rebind)
                };
                let wait = (until.saturating_sub(now_secs()) / 2).clamp(MIN_RETRY, MAX_RETRY);
                Step::Retry(phase, (now_secs() + wait).min(until)).log(id_text, &e)
            }
        }
    }
}

enum Step {
    Renewed(dhcp4::Message),
    Retry(Phase, u64),
    Lost(String),
    Gone(String),
}

impl Step {
    fn log(self, id: &str, e: &str) -> Step {
        log::warn!("{id}: {e}");
        self
    }
}

/// DHCPRELEASE for a record, best effort: the netns or link may be gone
/// (then nothing can be sent; the server's lease runs out on its own).
fn send_release(r: &Record) {
    let id_text = String::from_utf8_lossy(&r.client_id);
    log::info!("{id_text}: releasing lease");
    let Some(server) = r.server() else {
        return;
    };
    let outcome = r.open_netns().map_err(|e| e.to_string()).and_then(|ns| {
        let iface = client::resolve_iface_quiet(&ns, &r.if_name)?;
        client::release(&ns, &iface, &r.client_id, r.leased(), server)
    });
    if let Err(e) = outcome {
        log::warn!("{id_text}: failed to release DHCP lease: {e}");
    }
}

impl Service for Daemon {
    fn allocate(&self, args: &CmdArgs) -> Result<CniResult, String> {
        self.allocate_inner(args)
    }

    fn release(&self, args: &CmdArgs) -> Result<(), String> {
        self.release_inner(args)
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), String> {
        Daemon::gc(self, args)
    }
}
