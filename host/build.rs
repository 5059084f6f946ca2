//! Builds the command plugins from source for `wasm32-wasip2`, so the host can embed the
//! four handler components and the tests can use the others. A nested cargo runs with its
//! own target dir (beside ours), so it never waits on the outer build's lock.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (package, artifact) of every Rust plugin in the workspace.
const PLUGINS: &[(&str, &str)] = &[
    ("simple-text", "simple_text"),
    ("prompt", "prompt"),
    ("webhook", "webhook"),
    ("built-in", "built_in"),
    ("notes", "notes"),
    ("probe", "probe"),
    ("moody", "moody"),
    ("impostor", "impostor"),
    ("greedy", "greedy"),
];

fn main() {
    let host_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = host_dir.parent().expect("host/ is inside the workspace").to_path_buf();
    for watched in ["plugins", "plugin-sdk", "wit", "tests/plugins", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    // OUT_DIR is TARGET/PROFILE/build/agent-host-HASH/out: keep one plugin build per TARGET.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or(out_dir.clone())
        .join("wasm-plugins");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--locked", "--profile", "plugin", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir)
        // Flags meant for the host build must not leak into the wasm build.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    for (package, _) in PLUGINS {
        cmd.args(["-p", package]);
    }
    let status = cmd.status().expect("could not run cargo to build the plugins");
    if !status.success() {
        panic!(
            "building the plugins for wasm32-wasip2 failed: see cargo's message above \
             (a missing target is installed by scripts/setup.sh: `rustup target add wasm32-wasip2`)"
        );
    }
    for (_, artifact) in PLUGINS {
        let path = target_dir.join("wasm32-wasip2/plugin").join(format!("{artifact}.wasm"));
        assert!(path.is_file(), "missing plugin artifact {}", path.display());
        println!(
            "cargo:rustc-env=BUILT_PLUGIN_{}={}",
            artifact.to_uppercase(),
            path.display()
        );
    }
}
