//! x402 (versions 1 and 2, scheme `exact`; `upto` in version 2): the wire format and the checks a payment must
//! pass before anything is settled. Pure code: no store, no chain round trip, so the
//! checks are fast (the target is under 1 ms: BENCHMARKS.md) and unit-tested with crafted payments.

pub mod describe;
pub mod discovery;
pub mod evm;
pub mod gas_sponsoring;
pub mod offer_receipt;
pub mod payer;
pub mod payment_identifier;
pub mod sign_in;
pub mod svm;
pub mod upto;
pub mod wire;

/// Why a payment is refused; `code` goes in the `{success: false, error, code}` body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PaymentError {
    pub code: &'static str,
    pub message: String,
}

impl PaymentError {
    pub fn new(code: &'static str, message: impl Into<String>) -> PaymentError {
        PaymentError {
            code,
            message: message.into(),
        }
    }
}
