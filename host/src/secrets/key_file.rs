//! Where the master key lives, and how a rotation replaces its file without a moment in
//! which the disk does not hold the key that opens the database's secrets: the new key is
//! written to `master.key.next` before the database is resealed, and takes the place of
//! `master.key` after. A start that finds a `.next` file finishes or forgets the rotation,
//! by asking the database which of the two keys opens its check value.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{MasterKey, MasterKeyError, decode};

pub const MASTER_KEY_FILE: &str = "master.key";
const NEXT_FILE: &str = "master.key.next";
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

    /// Writes this key as the one a rotation is moving to, before the database changes.
    pub fn write_pending(&self, data_dir: &Path) -> Result<(), MasterKeyError> {
        write_new(&data_dir.join(NEXT_FILE), self)
    }
}

/// The pending key becomes `master.key`; the old key is kept beside it, as
/// `master.key.retired-<unix ms>`, for the backups sealed with it. Returns that path.
pub fn promote_pending(data_dir: &Path) -> Result<PathBuf, MasterKeyError> {
    let current = data_dir.join(MASTER_KEY_FILE);
    // Never over an older retired key: a backup may still need it.
    let mut stamp = crate::clock::now_ms();
    let retired = loop {
        let path = data_dir.join(format!("{MASTER_KEY_FILE}.retired-{stamp}"));
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
        std::fs::rename(&current, &retired).map_err(io(&current))?;
    }
    std::fs::rename(data_dir.join(NEXT_FILE), &current).map_err(io(&current))?;
    sync_dir(data_dir).map_err(io(data_dir))?;
    Ok(retired)
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

        // A second rotation within the same millisecond keeps both old keys.
        MasterKey([5; 32]).write_pending(dir.path()).unwrap();
        let again = promote_pending(dir.path()).unwrap();
        assert_ne!(again, retired);
        assert_eq!(read(&again).unwrap().unwrap().bytes(), &[2; 32]);
        assert_eq!(read(&retired).unwrap().unwrap().bytes(), &[1; 32]);
    }
}
