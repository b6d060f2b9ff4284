//! Helpers shared by the CLI tests: run the built binary, find the shared traces.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `lachesis` with `args`.
pub fn lachesis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .output()
        .expect("run lachesis")
}

/// Runs `lachesis`, asserts success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = lachesis(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs `lachesis`, asserts exit code 1, returns stderr.
pub fn fails(args: &[&str]) -> String {
    let o = lachesis(args);
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8(o.stderr).unwrap()
}

/// The path of `shared/traces/NAME`, found by walking up from the crate.
pub fn shared(name: &str) -> String {
    trace::find_shared_trace(name, std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|| panic!("shared/traces/{name} not found"))
        .display()
        .to_string()
}
