//! Builds the command plugins from source, so the host can embed the four handler
//! components and the tests can use the others. A nested cargo runs with its own target dir
//! (beside ours), so it never waits on the outer build's lock.
//!
//! Plugins are built for `wasm32-wasip2`, except the handlers that need nothing of WASI: those
//! are built for `wasm32-unknown-unknown` and made components here, so that an instance of
//! them links only our own interfaces (a `std` guest for WASI imports a dozen WASI
//! interfaces, each linked at every instantiation).

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
    ("frozen-0-2", "frozen_0_2"),
];

/// Handlers built without WASI (the webhook handler keeps it: it waits between polls).
const WITHOUT_WASI: &[&str] = &["simple-text", "prompt", "built-in"];

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

    let with_wasi: Vec<&str> = PLUGINS
        .iter()
        .map(|(package, _)| *package)
        .filter(|p| !WITHOUT_WASI.contains(p))
        .collect();
    build(&root, &target_dir, "wasm32-wasip2", &with_wasi);
    build(&root, &target_dir, "wasm32-unknown-unknown", WITHOUT_WASI);
    for (package, artifact) in PLUGINS {
        let path = if WITHOUT_WASI.contains(package) {
            componentize(&target_dir, artifact)
        } else {
            target_dir.join("wasm32-wasip2/plugin").join(format!("{artifact}.wasm"))
        };
        assert!(path.is_file(), "missing plugin artifact {}", path.display());
        println!(
            "cargo:rustc-env=BUILT_PLUGIN_{}={}",
            artifact.to_uppercase(),
            path.display()
        );
    }
}

fn build(root: &Path, target_dir: &Path, target: &str, packages: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--locked", "--profile", "plugin", "--target", target])
        .env("CARGO_TARGET_DIR", target_dir)
        // Flags meant for the host build must not leak into the wasm build.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER");
    for package in packages {
        cmd.args(["-p", package]);
    }
    let status = cmd.status().expect("could not run cargo to build the plugins");
    if !status.success() {
        panic!(
            "building the plugins for {target} failed: see cargo's message above \
             (a missing target is installed by scripts/setup.sh: `rustup target add {target}`)"
        );
    }
}

/// Wraps the core module wit-bindgen built (its world in a custom section) as a component:
/// what `wasm32-wasip2`'s linker does, without the WASI it would add. Rewritten only when it
/// changes, so the host is not rebuilt for nothing.
fn componentize(target_dir: &Path, artifact: &str) -> PathBuf {
    let module = target_dir
        .join("wasm32-unknown-unknown/plugin")
        .join(format!("{artifact}.wasm"));
    let bytes = std::fs::read(&module).unwrap_or_else(|e| panic!("reading {}: {e}", module.display()));
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .unwrap_or_else(|e| panic!("making {} a component: {e:#}", module.display()));
    let dir = target_dir.join("components");
    std::fs::create_dir_all(&dir).expect("create the components dir");
    let path = dir.join(format!("{artifact}.wasm"));
    if std::fs::read(&path).ok().as_deref() != Some(component.as_slice()) {
        std::fs::write(&path, component).expect("write the component");
    }
    path
}
