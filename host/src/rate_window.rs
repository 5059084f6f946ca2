//! The sliding-window estimate every rate limit counts with, in exact integer arithmetic.
//!
//! A fixed window lets a client spend its limit at the end of one window and again at the
//! start of the next: twice the limit in a moment. Here a key keeps its count in the
//! current window and in the one before; the one before counts for the part of it that
//! still lies within the last window length. So right after a window turns, a full previous
//! window leaves no room, and room comes back as the previous window slides out: over any
//! window's length, a burst at an edge gets little more than the limit.

pub const MINUTE_MS: i64 = 60_000;
pub const DAY_MS: i64 = 86_400_000;

/// One key's count in one kind of window (a minute, a UTC day).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCount {
    /// Start of the current window (Unix ms, a multiple of the window's length).
    pub start: i64,
    pub count: u32,
    /// The count of the window just before it.
    pub previous: u32,
}

impl WindowCount {
    /// The start of the window of length `len` that holds `now_ms`.
    pub fn start_of(now_ms: i64, len: i64) -> i64 {
        now_ms - now_ms.rem_euclid(len)
    }

    /// These counts as they stand in the window holding `now_ms`: an older current window
    /// becomes the previous one if it is the window just before, else both are empty.
    pub fn at(self, now_ms: i64, len: i64) -> WindowCount {
        let start = Self::start_of(now_ms, len);
        if self.start >= start {
            return self;
        }
        WindowCount {
            start,
            count: 0,
            previous: if self.start == start - len { self.count } else { 0 },
        }
    }

    /// Requests `limit` still allows at `now_ms` (these counts being of `now_ms`'s window).
    pub fn room(&self, limit: u32, len: i64, now_ms: i64) -> u32 {
        let unexpired = len - (now_ms - self.start).clamp(0, len);
        let used = i64::from(self.previous) * unexpired + i64::from(self.count) * len;
        let room = (i64::from(limit) * len - used).div_euclid(len);
        room.clamp(0, i64::from(u32::MAX)) as u32
    }

    /// Milliseconds from `now_ms` until one more request fits (0 if one fits now).
    pub fn wait_ms(&self, limit: u32, len: i64, now_ms: i64) -> i64 {
        if self.room(limit, len, now_ms) > 0 {
            return 0;
        }
        let elapsed = (now_ms - self.start).clamp(0, len);
        let (limit, count, previous) = (i64::from(limit), i64::from(self.count), i64::from(self.previous));
        if limit == 0 {
            return len;
        }
        if count < limit {
            // In this window, once enough of the previous one has slid out:
            // previous × (len − e) ≤ (limit − count − 1) × len.
            let at = len - ((limit - count - 1) * len) / previous.max(1);
            return (at - elapsed).max(1);
        }
        // In the next window, this one being the previous: count × (len − e) ≤ (limit − 1) × len.
        let at = len - ((limit - 1) * len) / count;
        (len - elapsed) + at.max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEN: i64 = 60_000;
    const T0: i64 = 1_795_341_600_000; // a minute's start

    fn counts(count: u32, previous: u32) -> WindowCount {
        WindowCount {
            start: T0,
            count,
            previous,
        }
    }

    #[test]
    fn the_previous_window_counts_for_what_still_lies_within_the_last_minute() {
        assert_eq!(counts(0, 0).room(10, LEN, T0), 10);
        assert_eq!(counts(0, 10).room(10, LEN, T0), 0, "a full minute just ended");
        assert_eq!(counts(0, 10).room(10, LEN, T0 + LEN / 2), 5, "half of it slid out");
        assert_eq!(counts(3, 10).room(10, LEN, T0 + LEN / 2), 2);
        assert_eq!(counts(0, 10).room(10, LEN, T0 + LEN - 1), 9, "a sliver is left of it");
        assert_eq!(counts(12, 0).room(10, LEN, T0), 0, "never negative");
    }

    #[test]
    fn a_window_turns_into_the_previous_one() {
        let now = counts(7, 2);
        assert_eq!(now.at(T0 + 5, LEN), now);
        assert_eq!(
            now.at(T0 + LEN + 5, LEN),
            WindowCount {
                start: T0 + LEN,
                count: 0,
                previous: 7
            }
        );
        assert_eq!(
            now.at(T0 + 3 * LEN, LEN),
            WindowCount {
                start: T0 + 3 * LEN,
                count: 0,
                previous: 0
            }
        );
    }

    /// Spending the limit at a window's end and again at the next one's start is the
    /// fixed window's flaw: here the two together stay near the limit.
    #[test]
    fn a_burst_at_a_window_edge_gets_little_more_than_the_limit() {
        let limit = 60;
        let mut window = WindowCount::default();
        let mut allowed = 0;
        // Requests every 10 ms from 1 s before a minute's end to 1 s after it.
        for step in 0..200 {
            let now = T0 + LEN - 1_000 + step * 10;
            window = window.at(now, LEN);
            if window.room(limit, LEN, now) > 0 {
                window.count += 1;
                allowed += 1;
            }
        }
        assert!(
            allowed <= limit + 2,
            "{allowed} in 2 s; a fixed window lets {} through",
            2 * limit
        );
        assert!(allowed >= limit, "{allowed}: the limit itself is served");
    }

    #[test]
    fn the_wait_is_exact() {
        // 10 of 10 in the previous minute, none now: one fits once a tenth slid out.
        let full = counts(0, 10);
        let wait = full.wait_ms(10, LEN, T0);
        assert_eq!(wait, LEN / 10);
        assert_eq!(full.room(10, LEN, T0 + wait - 1), 0);
        assert_eq!(full.room(10, LEN, T0 + wait), 1);
        // This minute full: the next one, once a tenth of this one slid out of it.
        let spent = counts(10, 0);
        let wait = spent.wait_ms(10, LEN, T0 + 1_000);
        assert_eq!(wait, LEN - 1_000 + LEN / 10);
        let later = spent.at(T0 + 1_000 + wait, LEN);
        assert_eq!(later.room(10, LEN, T0 + 1_000 + wait), 1);
        assert_eq!(counts(0, 0).wait_ms(10, LEN, T0), 0);
    }
}
