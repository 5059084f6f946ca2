//! Test-only crash points. A debug build dies on the spot (as if killed) at the point that
//! `AGENT_HOST_TEST_FAULT` names, so tests can prove a money path survives a crash at that
//! step. Release builds compile every point to nothing.
//!
//! The points, in the order a paid request meets them: `x402:after_sign`,
//! `x402:after_record`, `x402:after_send`, `x402:after_confirm`, `x402:after_work`,
//! `x402:after_served`, and in a refund `refund:after_start`; in a wallet transfer
//! (refunds are one): `transfer:after_record`, `transfer:after_sign`, `transfer:after_send`,
//! `transfer:after_confirm`; in a job that failed, between its end and its refund:
//! `job:after_finish`; in a master key rotation, halfway through the reseal
//! (`secrets:mid_rotation`) and after its commit (`secrets:after_commit`).

/// The variable naming the point to crash at.
pub const VARIABLE: &str = "AGENT_HOST_TEST_FAULT";

#[inline]
pub fn crash_point(name: &str) {
    #[cfg(debug_assertions)]
    if std::env::var(VARIABLE).is_ok_and(|point| point == name) {
        eprintln!("test fault: crashing at {name}");
        std::process::abort();
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}
