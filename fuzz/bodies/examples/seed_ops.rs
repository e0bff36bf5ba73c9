//! The operations of the netlink fuzz targets, against the kernel of the
//! calling namespace: fuzz/record-seeds runs this under strace, which
//! keeps the kernel's answers as the targets' seeds. Each operation prints
//! `SEED <target> <op>` to stderr first and runs on a fresh socket, as the
//! targets do (its first exchange has sequence number 1).
//!
//! With `seed_ops dbus <address> <file>`, it holds a conversation with the
//! bus at `address` instead and writes what the bus sent to `file` (the
//! dbus_reply target's input).

use fuzz_bodies::{NETFILTER_OPS, ROUTE_OPS, netfilter_op, route_op};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

/// A stream that writes a copy of everything read to a file.
struct Tee(UnixStream, std::fs::File);

impl Read for Tee {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.write_all(&buf[..n])?;
        Ok(n)
    }
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `Hello`, then calls answered with each kind of value the client reads
/// (a string, a boolean, a u32) and an error, as serials 2 to 5.
fn dbus(path: &str, out: &str) -> Result<(), String> {
    let sock = UnixStream::connect(path).map_err(|e| e.to_string())?;
    let _ = sock.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let copy = std::fs::File::create(out).map_err(|e| e.to_string())?;
    let mut conn = dbus::Connection::over(Tee(sock, copy)).map_err(|e| e.to_string())?;
    let bus = (
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
    );
    let calls: [(&str, &str, &str, &str, &[&str]); 4] = [
        (bus.0, bus.1, bus.2, "GetId", &[]),
        (
            bus.0,
            bus.1,
            bus.2,
            "NameHasOwner",
            &["org.fedoraproject.FirewallD1"],
        ),
        (
            bus.0,
            bus.1,
            bus.2,
            "GetConnectionUnixUser",
            &["org.freedesktop.DBus"],
        ),
        (
            "org.fedoraproject.FirewallD1",
            "/org/fedoraproject/FirewallD1",
            "org.fedoraproject.FirewallD1.zone",
            "getZoneOfSource",
            &["10.155.0.2/32"],
        ),
    ];
    for (dest, obj, iface, member, args) in calls {
        let r = conn.call(dest, obj, iface, member, args);
        eprintln!("{member} -> {r:?}");
    }
    Ok(())
}

/// The marker, in one write (the recorder looks for it in strace's log).
fn mark(target: &str, op: u8) {
    let _ = std::io::stderr().write_all(format!("SEED {target} {op}\n").as_bytes());
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, cmd, path, out] = &args[..]
        && cmd == "dbus"
    {
        return Ok(dbus(path, out)?);
    }
    for op in 0..ROUTE_OPS {
        mark("netlink_route", op);
        let r = route_op(&cni_net::Netlink::host()?, op);
        eprintln!("  -> {r:?}");
    }
    for op in 0..NETFILTER_OPS {
        mark("netlink_netfilter", op);
        let r = netfilter_op(op, None);
        eprintln!("  -> {r:?}");
    }
    Ok(())
}
