//! A tiny TCP/UDP responder and client for traffic tests, run inside a
//! namespace with `ip netns exec`.
//!
//! ```text
//! rcni-echo serve TAG PORT...          answer every TCP connection and UDP datagram
//!                                      on [::]:PORT (IPv4 and IPv6) with TAG; prints
//!                                      "ready" once listening, runs until killed
//! rcni-echo ask tcp|udp ADDR PORT [SRC_PORT [TIMEOUT_MS]]
//!                                      prints the answer; exit 1 without one
//! ```

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("ask") => ask(&args[1..]),
        _ => Err(
            "usage: rcni-echo serve TAG PORT... | ask tcp|udp ADDR PORT [SRC_PORT [TIMEOUT_MS]]"
                .into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rcni-echo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn port(s: Option<&String>) -> Result<u16, String> {
    s.ok_or("missing port")?
        .parse()
        .map_err(|e| format!("bad port: {e}"))
}

fn serve(args: &[String]) -> Result<(), String> {
    let tag = args.first().ok_or("missing tag")?.clone();
    let mut handles = Vec::new();
    for p in &args[1..] {
        let p = port(Some(p))?;
        let any = SocketAddr::from(([0u16; 8], p));
        let tcp = TcpListener::bind(any).map_err(|e| format!("tcp bind {p}: {e}"))?;
        let udp = UdpSocket::bind(any).map_err(|e| format!("udp bind {p}: {e}"))?;
        let t = tag.clone();
        handles.push(std::thread::spawn(move || {
            for conn in tcp.incoming().flatten() {
                let t = t.clone();
                std::thread::spawn(move || answer_tcp(conn, &t));
            }
        }));
        let t = tag.clone();
        handles.push(std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((_, from)) = udp.recv_from(&mut buf) {
                let _ = udp.send_to(t.as_bytes(), from);
            }
        }));
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

fn answer_tcp(mut conn: TcpStream, tag: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 64];
    let _ = conn.read(&mut buf);
    let _ = conn.write_all(tag.as_bytes());
}

fn ask(args: &[String]) -> Result<(), String> {
    let proto = args.first().ok_or("missing protocol")?;
    let addr: IpAddr = args
        .get(1)
        .ok_or("missing address")?
        .parse()
        .map_err(|e| format!("bad address: {e}"))?;
    let dst = SocketAddr::new(addr, port(args.get(2))?);
    let src_port = match args.get(3) {
        Some(s) => s.parse().map_err(|e| format!("bad source port: {e}"))?,
        None => 0,
    };
    let timeout = Duration::from_millis(match args.get(4) {
        Some(s) => s.parse().map_err(|e| format!("bad timeout: {e}"))?,
        None => 2000,
    });
    let answer = match proto.as_str() {
        "tcp" => {
            let mut s = TcpStream::connect_timeout(&dst, timeout)
                .map_err(|e| format!("connect {dst}: {e}"))?;
            s.set_read_timeout(Some(timeout))
                .map_err(|e| e.to_string())?;
            s.write_all(b"hi\n").map_err(|e| format!("send: {e}"))?;
            let mut out = String::new();
            s.read_to_string(&mut out)
                .map_err(|e| format!("read from {dst}: {e}"))?;
            out
        }
        "udp" => {
            let local: SocketAddr = if addr.is_ipv4() {
                SocketAddr::from(([0u8; 4], src_port))
            } else {
                SocketAddr::from(([0u16; 8], src_port))
            };
            let s = UdpSocket::bind(local).map_err(|e| format!("bind {local}: {e}"))?;
            s.set_read_timeout(Some(timeout))
                .map_err(|e| e.to_string())?;
            s.send_to(b"hi", dst)
                .map_err(|e| format!("send to {dst}: {e}"))?;
            let mut buf = [0u8; 2048];
            let (n, _) = s
                .recv_from(&mut buf)
                .map_err(|e| format!("no answer from {dst}: {e}"))?;
            String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned()
        }
        other => return Err(format!("unknown protocol {other}")),
    };
    println!("{answer}");
    Ok(())
}
