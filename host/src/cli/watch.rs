//! `--watch` for `plugin run` and `plugin test`: rebuild the plugin when its sources
//! change, then run again. Polls modification times (no platform watcher to set up); the
//! build's own outputs (`target/`, `node_modules/`, dot-folders) are not sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow};

const POLL: Duration = Duration::from_millis(400);
const NOT_SOURCES: &[&str] = &["target", "node_modules", "__pycache__"];

/// The build an author's folder calls for: `--build` as given, else the language's own
/// (Cargo.toml: cargo for wasm32-wasip2; package.json: `npm run build`; build.sh).
pub fn build_command(folder: &Path, given: Option<&str>) -> Option<String> {
    if let Some(given) = given {
        return Some(given.to_string());
    }
    if folder.join("Cargo.toml").exists() {
        Some("cargo build --release --target wasm32-wasip2".into())
    } else if folder.join("package.json").exists() {
        Some("npm run build".into())
    } else if folder.join("build.sh").exists() {
        Some("./build.sh".into())
    } else {
        None
    }
}

/// Runs `once`, then again after every change under `folder` or to `component` (after
/// rebuilding, for a source change), until the process is stopped. A failed build or run
/// is reported and waited out.
pub async fn watch<F, Fut>(folder: &Path, component: &Path, build: Option<String>, mut once: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    eprintln!(
        "watching {} ({}); Ctrl-C stops",
        folder.display(),
        build
            .as_deref()
            .map(|b| format!("rebuilds with `{b}`"))
            .unwrap_or_else(|| "no build".into())
    );
    loop {
        // Taken before the run: a change made while it runs starts the next one.
        let sources = snapshot(folder);
        let built = modified(component);
        match once().await {
            Err(e) if !e.is::<super::AlreadyReported>() => eprintln!("error: {e:#}"),
            _ => {}
        }
        // Said once the first look after a run finds nothing: the run is over and whatever
        // it (or the build before it) wrote is not taken for a change.
        let mut idle_said = false;
        loop {
            tokio::time::sleep(POLL).await;
            if snapshot(folder) != sources || modified(component) != built {
                break;
            }
            if !idle_said {
                eprintln!("waiting for changes");
                idle_said = true;
            }
        }
        // Let an editor (or another build) finish writing first.
        tokio::time::sleep(POLL).await;
        if snapshot(folder) == sources {
            eprintln!("changed: {}", component.display());
        } else if let Some(command) = &build {
            eprintln!("changed: {command}");
            if let Err(e) = run_build(folder, command).await {
                eprintln!("error: {e:#}");
            }
        } else {
            eprintln!("changed: running again");
        }
    }
}

async fn run_build(folder: &Path, command: &str) -> anyhow::Result<()> {
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(folder)
        .status()
        .await
        .with_context(|| format!("cannot start `{command}`"))?;
    if status.success() {
        Ok(())
    } else {
        Err(anyhow!("`{command}` failed ({status})"))
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Every source file's modification time.
fn snapshot(folder: &Path) -> BTreeMap<PathBuf, SystemTime> {
    let mut seen = BTreeMap::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if !name.starts_with('.') && !NOT_SOURCES.contains(&name.as_ref()) {
                    pending.push(path);
                }
            } else if let Ok(modified) = meta.modified() {
                seen.insert(path, modified);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_follows_the_folder() {
        let dir = std::env::temp_dir().join(format!("watch-{}", crate::random::hex_token(6)));
        std::fs::create_dir_all(dir.join("target")).unwrap();
        assert_eq!(build_command(&dir, None), None);
        assert_eq!(build_command(&dir, Some("make")), Some("make".into()));
        std::fs::write(dir.join("package.json"), "{}").unwrap();
        assert_eq!(build_command(&dir, None), Some("npm run build".into()));
        std::fs::write(dir.join("Cargo.toml"), "").unwrap();
        assert_eq!(
            build_command(&dir, None),
            Some("cargo build --release --target wasm32-wasip2".into())
        );
        // Build outputs are not sources: writing them does not count as a change.
        let before = snapshot(&dir);
        std::fs::write(dir.join("target/out.wasm"), "x").unwrap();
        assert_eq!(snapshot(&dir), before);
        std::fs::write(dir.join("lib.rs"), "x").unwrap();
        assert_ne!(snapshot(&dir), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
