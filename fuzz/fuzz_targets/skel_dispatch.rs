//! The skel's whole input path: the first line holds `|`-separated values
//! of the variables the skel reads (`cni_skel::env::VARS`, in order:
//! CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH);
//! the rest is stdin. The outcome must be exit 0 or 1, with a CNI error on 1.
#![no_main]

use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use libfuzzer_sys::fuzz_target;

struct Echo;

impl Plugin for Echo {
    fn about(&self) -> String {
        "echo".into()
    }
    fn add(&self, args: &CmdArgs) -> CmdResult {
        args.cni_args(&["IP", "MAC"])?;
        Ok(Output::Result(args.prev_result()?.unwrap_or_else(|| {
            CniResult {
                cni_version: args.cni_version().to_string(),
                ..Default::default()
            }
        })))
    }
    fn del(&self, _: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }
    fn check(&self, args: &CmdArgs) -> CmdResult {
        args.prev_result()?
            .ok_or_else(|| CniError::internal("no prevResult"))
            .map(|_| Output::Nothing)
    }
}

fuzz_target!(|data: &[u8]| {
    let (head, stdin) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut parts = head.split('|');
    let mut env = std::collections::HashMap::new();
    for &k in cni_skel::env::VARS {
        if let Some(v) = parts.next() {
            env.insert(k, v.to_string());
        }
    }
    let o = cni_skel::dispatch(
        &Echo,
        &move |k| env.get(k).cloned(),
        Box::new(std::io::Cursor::new(stdin.to_vec())),
    );
    assert!(o.exit <= 1, "exit {}", o.exit);
    if o.exit == 1 {
        let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("error is JSON");
        assert!(v["code"].is_u64() && v["msg"].is_string(), "{}", o.stdout);
    }
});
