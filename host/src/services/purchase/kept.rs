//! The answer a payment bought, kept with the payment so that the payer's retry gets it
//! again (payments::retry finds it; each transport writes it as it wrote the first).
//! A failure refunded by the agent is not kept: the payment's state tells it.

use serde::{Deserialize, Serialize};

use super::SaleOutcome;
use crate::domain::ResponseFormat;
use crate::services::ServiceError;
use crate::services::commands::Answer;
use crate::store::StoreError;

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Kept {
    Answered {
        response: String,
        format: String,
        media_url: Option<String>,
        /// Kept only when set (answers kept before it was are not).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cut_short: bool,
    },
    Queued {
        job_id: String,
    },
    /// The payer's own input, refused by the command: the work ran, the payment is served.
    Refused {
        message: String,
    },
}

/// `outcome` as kept; `None` for one that is not (a refunded failure).
pub(super) fn keep(outcome: &SaleOutcome) -> Option<String> {
    let kept = match outcome {
        SaleOutcome::Answered(answer) => Kept::Answered {
            response: answer.response.clone(),
            format: answer.format.as_str().to_string(),
            media_url: answer.media_url.clone(),
            cut_short: answer.cut_short,
        },
        SaleOutcome::Queued { job_id } => Kept::Queued { job_id: job_id.clone() },
        SaleOutcome::Failed {
            error: ServiceError::Validation(message),
            refund: None,
        } => Kept::Refused {
            message: message.clone(),
        },
        SaleOutcome::Failed { .. } => return None,
    };
    serde_json::to_string(&kept).ok()
}

/// The outcome a kept answer tells again.
pub(super) fn recall(kept: &str) -> Result<SaleOutcome, ServiceError> {
    let corrupt = |why: String| ServiceError::Store(StoreError::Corrupt(format!("a kept answer: {why}")));
    Ok(
        match serde_json::from_str::<Kept>(kept).map_err(|e| corrupt(e.to_string()))? {
            Kept::Answered {
                response,
                format,
                media_url,
                cut_short,
            } => SaleOutcome::Answered(Answer {
                response,
                format: ResponseFormat::parse(&format).ok_or_else(|| corrupt(format!("format {format}")))?,
                media_url,
                cut_short,
            }),
            Kept::Queued { job_id } => SaleOutcome::Queued { job_id },
            Kept::Refused { message } => SaleOutcome::Failed {
                error: ServiceError::Validation(message),
                refund: None,
            },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn again(outcome: &SaleOutcome) -> String {
        format!("{:?}", recall(&keep(outcome).expect("kept")).unwrap())
    }

    #[test]
    fn what_a_payment_bought_is_told_again_as_it_was() {
        let answered = SaleOutcome::Answered(Answer {
            response: "Sunny, 21 °C".into(),
            format: ResponseFormat::Image,
            media_url: Some("https://example.com/sun.png".into()),
            cut_short: true,
        });
        let queued = SaleOutcome::Queued { job_id: "job1".into() };
        let refused = SaleOutcome::Failed {
            error: ServiceError::Validation("city must be a place".into()),
            refund: None,
        };
        for outcome in [answered, queued, refused] {
            assert_eq!(again(&outcome), format!("{outcome:?}"));
        }
        // A refunded failure is told by the payment's state, not kept.
        let refunded = SaleOutcome::Failed {
            error: ServiceError::Execution("the plugin trapped".into()),
            refund: Some(super::super::RefundStarted { transaction: None }),
        };
        assert!(keep(&refunded).is_none());
    }
}
