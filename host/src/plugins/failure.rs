//! Why a run produced no output, in words its author can act on: the plugin's own answer,
//! the limit it hit (time, memory, output), or how it crashed.

use std::time::Duration;

use wasmtime::{Store, Trap};

use super::bindings::types::{CommandError, Output};
use super::budget;
use super::state::HostState;

/// A limit a run can exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Its deadline.
    Time,
    /// Its memory budget: linear memories and what it had the host hold (`budget.rs`).
    Memory,
    /// The size of its answer.
    Output,
}

/// Why a run produced no output. The first three are the plugin's own answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecError {
    InvalidInput(String),
    Failed(String),
    Unavailable(String),
    /// Stopped at one of its limits; the message says which and how much.
    Exceeded(Limit, String),
    /// Trapped or panicked; the message says how.
    Crashed(String),
    /// The component could not be loaded or instantiated.
    Load(String),
    /// No slot came free in time: the account's share, or the whole server, is busy.
    Busy(String),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::InvalidInput(m) => write!(f, "invalid input: {m}"),
            ExecError::Failed(m) => write!(f, "{m}"),
            ExecError::Unavailable(m) => write!(f, "unavailable: {m}"),
            ExecError::Exceeded(_, m) => write!(f, "{m}"),
            ExecError::Crashed(m) => write!(f, "{m}"),
            ExecError::Load(m) => write!(f, "the plugin could not be loaded: {m}"),
            ExecError::Busy(m) => write!(f, "{m}"),
        }
    }
}

/// What a finished run comes to: its output within the limits, or why not.
pub(super) fn judge(
    outcome: Result<wasmtime::Result<Result<Output, CommandError>>, tokio::time::error::Elapsed>,
    store: &Store<HostState>,
    timeout: Duration,
    max_output_bytes: usize,
) -> Result<Output, ExecError> {
    let result = match outcome {
        Err(_) => return Err(timed_out(timeout)),
        Ok(Err(trap)) => return Err(describe_failure(&trap, store, timeout)),
        // Whatever the guest answered, a run refused host memory failed for its memory.
        Ok(Ok(_)) if store.data().budget.overdrawn() => return Err(memory_exceeded(store)),
        Ok(Ok(result)) => result,
    };
    match result {
        Ok(output) => {
            let size = output.response.len() + output.media_url.as_ref().map_or(0, String::len);
            if size > max_output_bytes {
                return Err(ExecError::Exceeded(
                    Limit::Output,
                    format!("the command's output ({size} bytes) is larger than the limit of {max_output_bytes} bytes"),
                ));
            }
            Ok(output)
        }
        Err(CommandError::InvalidInput(m)) => Err(ExecError::InvalidInput(cut(m))),
        Err(CommandError::Failed(m)) => Err(ExecError::Failed(cut(m))),
        Err(CommandError::Unavailable(m)) => Err(ExecError::Unavailable(cut(m))),
    }
}

/// Most characters of a plugin's own words (its error message, its panic message) the host
/// keeps, stores and echoes: run records, job statuses, refund memos and replies all carry
/// them, so a plugin cannot fill them with megabytes.
pub const MAX_MESSAGE_CHARS: usize = 1_000;

/// `message` cut to `MAX_MESSAGE_CHARS`, marked where it was cut.
pub fn cut(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => message,
        Some((at, _)) => format!("{}… (cut at {MAX_MESSAGE_CHARS} characters)", &message[..at]),
    }
}

/// A Rust guest's panic from its stderr: `panicked at FILE:LINE:COL: MESSAGE` (the message
/// is on the line after the location since Rust 1.73).
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.contains("panicked"));
    let first = lines.next()?.trim();
    let first = first.find("panicked").map_or(first, |at| &first[at..]);
    match lines.next().map(str::trim) {
        Some(message) if !message.is_empty() && !message.starts_with("note:") => Some(format!("{first} {message}")),
        _ => Some(first.to_string()),
    }
}

pub(super) fn timed_out(timeout: Duration) -> ExecError {
    ExecError::Exceeded(
        Limit::Time,
        format!("the command timed out after {} ms", timeout.as_millis()),
    )
}

/// The run's memory failure, in the words of the limit it hit.
pub(super) fn memory_exceeded(store: &Store<HostState>) -> ExecError {
    let budget = &store.data().budget;
    let limit = budget
        .exceeded()
        .unwrap_or_else(|| format!("the memory limit of {} MiB", budget.max() >> 20));
    ExecError::Exceeded(Limit::Memory, format!("the command exceeded {limit}"))
}

/// Says why a guest stopped: which limit, which trap, or its panic message.
pub(super) fn describe_failure(err: &wasmtime::Error, store: &Store<HostState>, timeout: Duration) -> ExecError {
    let state = store.data();
    // A full handle table is host memory too: every handle costs the host.
    let table_full = matches!(
        err.downcast_ref::<wasmtime::component::ResourceTableError>(),
        Some(wasmtime::component::ResourceTableError::Full)
    );
    if state.budget.overdrawn() || (state.budget.exceeded().is_some() && !table_full) {
        return memory_exceeded(store);
    }
    if table_full {
        return ExecError::Exceeded(
            Limit::Memory,
            format!(
                "the command exceeded the limit of {} handles (resources such as streams and fields) held at once",
                budget::MAX_HANDLES
            ),
        );
    }
    if let Some(limit) = &state.limiter.tables_exceeded {
        return ExecError::Exceeded(Limit::Memory, format!("the command exceeded {limit}"));
    }
    let stderr = state.stderr_text();
    let panic_line = panic_message(&stderr);
    ExecError::Crashed(match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return timed_out(timeout),
        Some(Trap::StackOverflow) => "the command overflowed its stack (recursion too deep)".into(),
        // A Rust or C guest keeps its own stack in linear memory; overflowing it usually
        // shows up as an access outside that memory.
        Some(Trap::MemoryOutOfBounds) => {
            "the plugin crashed with an out-of-bounds memory access (often its own stack overflowing: recursion too deep)"
                .into()
        }
        Some(Trap::UnreachableCodeReached) => match panic_line {
            Some(message) => format!("the plugin {}", cut(message)),
            None => "the plugin crashed (it reached an unreachable instruction)".into(),
        },
        Some(trap) => format!("the plugin trapped: {trap}"),
        None => {
            let text = format!("{err:#}");
            format!("the plugin failed: {}", text.lines().next().unwrap_or("unknown error"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{MAX_MESSAGE_CHARS, cut, panic_message};

    #[test]
    fn a_plugins_words_are_cut_to_a_stated_length() {
        assert_eq!(cut("short".into()), "short");
        let long = "é".repeat(5 * MAX_MESSAGE_CHARS);
        let kept = cut(long);
        assert!(kept.starts_with(&"é".repeat(MAX_MESSAGE_CHARS)));
        assert!(kept.ends_with("… (cut at 1000 characters)"));
        assert!(kept.chars().count() < MAX_MESSAGE_CHARS + 40);
    }

    #[test]
    fn a_panic_is_told_with_its_message() {
        let now = "thread '<unnamed>' (1) panicked at src/lib.rs:77:24:\nthe probe panicked on purpose\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(now).as_deref(),
            Some("panicked at src/lib.rs:77:24: the probe panicked on purpose")
        );
        let older = "thread '<unnamed>' panicked at 'boom', src/lib.rs:3:5\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(older).as_deref(),
            Some("panicked at 'boom', src/lib.rs:3:5")
        );
        assert_eq!(panic_message("nothing here"), None);
    }
}
