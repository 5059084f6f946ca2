//! A command's sign-in terms (`sign_in = { pass, free }`): what a wallet that signs in with
//! x402's sign-in-with-x may use without paying, checked as the manifest is read.

use serde::Deserialize;
use toml::Spanned;

use super::{Checker, ManifestError};
use crate::domain::{Allowance, SignInTerms};

/// `sign_in = { pass = { calls, hours }, free = { calls, hours } }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSignIn {
    #[serde(default)]
    pass: Option<Allowance>,
    #[serde(default)]
    free: Option<Allowance>,
}

/// Most calls and hours an allowance may name (a year).
const MAX_ALLOWANCE_CALLS: u32 = 1_000_000;
const MAX_ALLOWANCE_HOURS: u32 = 8_760;

/// A command's sign-in terms: only for a command sold over x402 (a sign-in stands in for
/// a payment); a pass bounded by calls, hours or both, a free allowance by both.
pub(super) fn terms(
    check: &Checker<'_>,
    raw: Spanned<RawSignIn>,
    at: &dyn Fn(&str) -> String,
    sold: bool,
) -> Result<SignInTerms, ManifestError> {
    let span = raw.span();
    let raw = raw.into_inner();
    let fail = |field: &str, message: &str| Err(check.err(Some(&span), at(field), message));
    if !sold {
        return fail(
            "sign_in",
            "needs \"x402\" in integrations: a sign-in stands in for a payment",
        );
    }
    if raw.pass.is_none() && raw.free.is_none() {
        return fail("sign_in", "names a pass, a free allowance, or both");
    }
    if raw.pass.is_some_and(|pass| pass.total.is_some()) {
        return fail("sign_in.pass.total", "is for free calls only (a pass is one wallet's)");
    }
    for (name, allowance) in [("sign_in.pass", raw.pass), ("sign_in.free", raw.free)] {
        let Some(Allowance { calls, hours, total }) = allowance else {
            continue;
        };
        if total.is_some_and(|t| t == 0 || t > MAX_ALLOWANCE_CALLS) {
            return fail(name, &format!("total must be between 1 and {MAX_ALLOWANCE_CALLS}"));
        }
        if calls.is_none() && hours.is_none() {
            return fail(name, "names calls, hours or both");
        }
        if calls.is_some_and(|c| c == 0 || c > MAX_ALLOWANCE_CALLS) {
            return fail(name, &format!("calls must be between 1 and {MAX_ALLOWANCE_CALLS}"));
        }
        if hours.is_some_and(|h| h == 0 || h > MAX_ALLOWANCE_HOURS) {
            return fail(name, &format!("hours must be between 1 and {MAX_ALLOWANCE_HOURS}"));
        }
    }
    if raw
        .free
        .is_some_and(|free| free.calls.is_none() || free.hours.is_none())
    {
        return fail(
            "sign_in.free",
            "names both calls and hours (so many calls in every so many hours)",
        );
    }
    Ok(SignInTerms {
        pass: raw.pass,
        free: raw.free,
    })
}
