//! Where the master key lives, and how a rotation replaces its file without a moment in
//! which the disk does not hold the key that opens the database's secrets: the new key is
//! written to `master.key.next` before the database is resealed, and takes the place of
//! `master.key` after (the old one kept as `master.key.retired-<ms>`). A start that finds a
//! `.next` file finishes or forgets the rotation, by asking the database which of the two
//! keys opens its check value. Both hold `master.key.lock` while they do: a process that
//! starts while a rotation runs waits for it, and never forgets a key mid-rotation.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{MasterKey, MasterKeyError, decode};

pub const MASTER_KEY_FILE: &str = "master.key";
const NEXT_FILE: &str = "master.key.next";
const LOCK_FILE: &str = "master.key.lock";
const RETIRED_PREFIX: &str = "master.key.retired-";
const ENV: &str = "AGENT_HOST_MASTER_KEY";

/// Where this process's master key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `AGENT_HOST_MASTER_KEY`: the operator keeps it (every host of a shared database).
    Environment,
    /// `DATA_DIR/master.key`.
    File(PathBuf),
}

impl KeySource {
    pub fn of(data_dir: &Path) -> KeySource {
        match std::env::var_os(ENV) {
            Some(_) => KeySource::Environment,
            None => KeySource::File(data_dir.join(MASTER_KEY_FILE)),
        }
    }
}

impl MasterKey {
    /// The key from the environment, else the data dir's file, created if missing.
    pub fn load_or_create(data_dir: &Path) -> Result<MasterKey, MasterKeyError> {
        let path = match KeySource::of(data_dir) {
            KeySource::Environment => {
                let text = std::env::var(ENV).map_err(|_| MasterKeyError::BadEnv)?;
                return decode(text.trim()).ok_or(MasterKeyError::BadEnv);
            }
            KeySource::File(path) => path,
        };
        match read(&path)? {
            Some(key) => Ok(key),
            // A data dir that has known a key is never given a new one silently: its
            // secrets would be out of reach.
            None if has_known_a_key(data_dir) => Err(MasterKeyError::Missing(path)),
            None => {
                let key = MasterKey::generate();
                write_new(&path, &key)?;
                Ok(key)
            }
        }
    }

    /// The new key of a rotation cut off before it finished, if there is one.
    pub fn pending(data_dir: &Path) -> Result<Option<MasterKey>, MasterKeyError> {
        read(&data_dir.join(NEXT_FILE))
    }

    /// Writes this key as the one a rotation is moving to, before the database changes:
    /// whole or not at all (written aside, then renamed). Run it holding the lock.
    pub fn write_pending(&self, data_dir: &Path) -> Result<(), MasterKeyError> {
        let (aside, next) = (data_dir.join(format!("{NEXT_FILE}.tmp")), data_dir.join(NEXT_FILE));
        if next.exists() {
            return Err(MasterKeyError::Io {
                path: next,
                source: std::io::ErrorKind::AlreadyExists.into(),
            });
        }
        let _ = std::fs::remove_file(&aside);
        write_new(&aside, self)?;
        std::fs::rename(&aside, &next).map_err(|source| MasterKeyError::Io { path: next, source })?;
        sync_dir(data_dir).map_err(|source| MasterKeyError::Io {
            path: data_dir.to_path_buf(),
            source,
        })
    }
}

/// Held while a rotation, or a start's look at one, runs: see the module's words.
pub struct KeyLock(#[allow(dead_code)] std::fs::File);

/// Waits until no other process of this data dir rotates its key, and holds that until
/// the lock is dropped.
pub fn lock(data_dir: &Path) -> Result<KeyLock, MasterKeyError> {
    let path = data_dir.join(LOCK_FILE);
    let io = |source| MasterKeyError::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    file.lock().map_err(io)?;
    Ok(KeyLock(file))
}

/// The pending key becomes `master.key`; the old key is kept beside it, as
/// `master.key.retired-<unix ms>`, for the backups sealed with it. Returns that path.
/// `master.key` is replaced in one rename: there is always a key file. Run it holding the
/// lock.
pub fn promote_pending(data_dir: &Path) -> Result<PathBuf, MasterKeyError> {
    let current = data_dir.join(MASTER_KEY_FILE);
    // Never over an older retired key: a backup may still need it.
    let mut stamp = crate::clock::now_ms();
    let retired = loop {
        let path = data_dir.join(format!("{RETIRED_PREFIX}{stamp}"));
        if !path.exists() {
            break path;
        }
        stamp += 1;
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MasterKeyError::Io { path, source }
    };
    if current.exists() {
        std::fs::hard_link(&current, &retired).map_err(io(&retired))?;
    }
    std::fs::rename(data_dir.join(NEXT_FILE), &current).map_err(io(&current))?;
    sync_dir(data_dir).map_err(io(data_dir))?;
    Ok(retired)
}

/// A pending or retired key lies in the data dir.
fn has_known_a_key(data_dir: &Path) -> bool {
    data_dir.join(NEXT_FILE).exists()
        || std::fs::read_dir(data_dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with(RETIRED_PREFIX))
        })
}

/// Forgets a pending key the database never moved to.
pub fn forget_pending(data_dir: &Path) -> Result<(), MasterKeyError> {
    let path = data_dir.join(NEXT_FILE);
    std::fs::remove_file(&path).map_err(|source| MasterKeyError::Io { path, source })
}

fn read(path: &Path) -> Result<Option<MasterKey>, MasterKeyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => decode(text.trim())
            .map(Some)
            .ok_or_else(|| MasterKeyError::BadFile(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MasterKeyError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes a key file that must not exist yet, private (0600) and synced to disk.
fn write_new(path: &Path, key: &MasterKey) -> Result<(), MasterKeyError> {
    let io = |source| MasterKeyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    file.write_all(hex::encode(key.bytes()).as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir).map_err(io)?;
    }
    Ok(())
}

/// A rename or a new file survives a power loss only once its directory is synced.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_key_replaces_the_file_and_the_old_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let old = MasterKey([1; 32]);
        write_new(&dir.path().join(MASTER_KEY_FILE), &old).unwrap();
        assert!(MasterKey::pending(dir.path()).unwrap().is_none());
        MasterKey([2; 32]).write_pending(dir.path()).unwrap();
        assert!(
            MasterKey([3; 32]).write_pending(dir.path()).is_err(),
            "one rotation at a time"
        );
        assert_eq!(MasterKey::pending(dir.path()).unwrap().unwrap().bytes(), &[2; 32]);

        let retired = promote_pending(dir.path()).unwrap();
        assert_eq!(read(&retired).unwrap().unwrap().bytes(), &[1; 32]);
        let current = read(&dir.path().join(MASTER_KEY_FILE)).unwrap().unwrap();
        assert_eq!(current.bytes(), &[2; 32]);
        assert!(MasterKey::pending(dir.path()).unwrap().is_none());

        MasterKey([4; 32]).write_pending(dir.path()).unwrap();
        forget_pending(dir.path()).unwrap();
        assert!(MasterKey::pending(dir.path()).unwrap().is_none());

        // A key file gone while a retired one is there is an error, not a new key.
        std::fs::remove_file(dir.path().join(MASTER_KEY_FILE)).unwrap();
        assert!(matches!(
            MasterKey::load_or_create(dir.path()),
            Err(MasterKeyError::Missing(_))
        ));
        write_new(&dir.path().join(MASTER_KEY_FILE), &MasterKey([2; 32])).unwrap();

        // A second rotation within the same millisecond keeps both old keys.
        MasterKey([5; 32]).write_pending(dir.path()).unwrap();
        let again = promote_pending(dir.path()).unwrap();
        assert_ne!(again, retired);
        assert_eq!(read(&again).unwrap().unwrap().bytes(), &[2; 32]);
        assert_eq!(read(&retired).unwrap().unwrap().bytes(), &[1; 32]);
    }
}
