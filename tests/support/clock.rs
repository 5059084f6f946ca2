//! A controllable clock for the hosts under test.

use std::path::PathBuf;

/// The time the hosts' schedules and remote OAuth grants see (`AGENT_HOST_TEST_CLOCK`, debug
/// builds only): a file of Unix milliseconds, which the test moves.
pub struct Clock {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Clock {
    pub fn at(iso: &str) -> Clock {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock {
            path: dir.path().join("clock"),
            _dir: dir,
        };
        clock.set(iso);
        clock
    }

    /// Standing at the real time now.
    pub fn now() -> Clock {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock {
            path: dir.path().join("clock"),
            _dir: dir,
        };
        clock.set_ms(now_ms());
        clock
    }

    pub fn set(&self, iso: &str) {
        let at = time::OffsetDateTime::parse(iso, &time::format_description::well_known::Rfc3339).unwrap();
        self.set_ms((at.unix_timestamp_nanos() / 1_000_000) as i64);
    }

    pub fn set_ms(&self, ms: i64) {
        // Written whole, then moved: a host never reads half a time.
        let next = self.path.with_extension("next");
        std::fs::write(&next, ms.to_string()).unwrap();
        std::fs::rename(next, &self.path).unwrap();
    }

    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AGENT_HOST_TEST_CLOCK", self.path.display().to_string()),
            ("AGENT_HOST_SCHEDULE_POLL_MS", "50".into()),
        ]
    }
}

/// The real time, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
